"""Assemble data/requests/labelled.jsonl from hand-written requests.

Every prompt and every label below was written by hand; this script only wraps them in OpenAI request bodies
and numbers them. The label is the minimum tier a careful operator would allow (rubric in
data/requests/README.md). The classifier is tuned against these labels, never the other way round, so do not
"fix" a label to make a rule pass without re-reading the request.

    python scripts/build_labelled_requests.py            # rewrites data/requests/labelled.jsonl
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

MODEL = "llama3-8b"
OUT = Path(__file__).resolve().parent.parent / "data" / "requests" / "labelled.jsonl"

ROWS: list[dict] = []
_SEQ: Counter[str] = Counter()


def chat(*turns: str, sys: str | None = None, parts: bool = False, **params) -> dict:
    """Turns alternate user / assistant, starting with user. `parts` sends the last user turn as
    list-of-parts content, as the newer SDKs and multimodal front-ends do."""
    messages: list[dict] = [{"role": "system", "content": sys}] if sys else []
    for i, text in enumerate(turns):
        messages.append({"role": "user" if i % 2 == 0 else "assistant", "content": text})
    if parts:
        messages[-1]["content"] = [{"type": "text", "text": messages[-1]["content"]}]
    return {"model": MODEL, "messages": messages, **params}


def comp(prompt: str | list[str], **params) -> dict:
    return {"model": MODEL, "prompt": prompt, **params}


def add(kind: str, tier: str, why: str, body: dict, **headers: str) -> None:
    _SEQ[kind] += 1
    row = {"id": f"{kind}-{_SEQ[kind]:03d}", "body": body}
    if headers:
        row["headers"] = {k.replace("_", "-"): v for k, v in headers.items()}
    row.update(expected_tier=tier, why=why)
    ROWS.append(row)


def schema(name: str, properties: dict, required: list[str]) -> dict:
    return {"type": "json_schema", "json_schema": {"name": name, "strict": True, "schema": {
        "type": "object", "properties": properties, "required": required, "additionalProperties": False}}}


def tool(name: str, description: str, properties: dict, required: list[str]) -> dict:
    return {"type": "function", "function": {"name": name, "description": description, "parameters": {
        "type": "object", "properties": properties, "required": required}}}


S, N, I, A = ({"type": "string"}, {"type": "number"}, {"type": "integer"},
                 lambda item: {"type": "array", "items": item})

# ---------------------------------------------------------------------------------------------------------
# fp16: greedy/low temperature + structured or precise output; > 1000 output tokens; priority >= 9; min-tier
# ---------------------------------------------------------------------------------------------------------
CODER = "You are a senior Python engineer. Answer with code only unless asked to explain."

add("code", "fp16", "Greedy code generation with an exact signature to satisfy.", chat(
    "Write a Python function `merge_intervals(intervals: list[tuple[int, int]]) -> list[tuple[int, int]]` that "
    "merges overlapping closed intervals and returns them sorted. Include type hints and a docstring.",
    sys=CODER, temperature=0, max_tokens=400))
add("code", "fp16", "Temperature 0 code generation; one wrong token breaks the regex.", chat(
    "Give me a Python regex that validates an IPv4 address (each octet 0-255, no leading zeros) and a few "
    "pytest cases for it.", sys=CODER, temperature=0))
add("code", "fp16", "Low-temperature TypeScript with generics that must type-check.", chat(
    "Write a TypeScript function `groupBy<T, K extends PropertyKey>(items: T[], key: (t: T) => K): Record<K, T[]>` "
    "without using lodash. Then show one usage example.",
    sys="You are a TypeScript expert. Prefer strict, idiomatic code.", temperature=0.2, max_tokens=500))
add("code", "fp16", "Greedy Rust code; borrow-checker errors come from small token changes.", chat(
    "Implement an LRU cache in Rust with `get(&mut self, key: &K) -> Option<&V>` and `put(&mut self, key: K, "
    "value: V)`, O(1) both. Use only std.", temperature=0, max_tokens=900))
add("code", "fp16", "Bash script at temperature 0: flags and quoting must be exact.", chat(
    "Write a bash script that finds all *.log files older than 14 days under /var/log/myapp, gzips them, and "
    "deletes gz files older than 90 days. It must be safe with spaces in filenames and support --dry-run.",
    sys="You write POSIX-friendly, shellcheck-clean bash.", temperature=0))
add("code", "fp16", "Greedy unit-test generation against given code.", chat(
    "Write pytest tests for this function, covering edge cases:\n\n```python\ndef slugify(title: str, max_len: int "
    "= 60) -> str:\n    s = re.sub(r'[^a-z0-9]+', '-', title.lower()).strip('-')\n    return s[:max_len].rstrip('-')"
    "\n```", sys=CODER, temperature=0, max_tokens=700))
add("code", "fp16", "Go concurrency code at low temperature; subtle races if a token slips.", chat(
    "In Go, write a worker pool that processes jobs from a channel with N workers, stops on context "
    "cancellation, and returns the first error (errgroup is fine).", temperature=0.1, max_tokens=800))
add("code", "fp16", "Greedy Dockerfile; exact syntax required.", chat(
    "Write a multi-stage Dockerfile for a FastAPI app using uv for dependencies, running as non-root, with a "
    "healthcheck on /healthz. Python 3.12 slim base.", sys="You are a DevOps engineer.", temperature=0))
add("code", "fp16", "Code completion prompt at temperature 0.", comp(
    "# Python 3\n# Return the n-th Fibonacci number modulo 1_000_000_007 using fast doubling.\n"
    "def fib_mod(n: int) -> int:\n", temperature=0, max_tokens=256, stop=["\n\n\n"]))
add("code", "fp16", "Batch of greedy code completions.", comp([
    "// JavaScript: debounce(fn, ms) returns a debounced function with a .cancel() method\nfunction debounce(",
    "-- PostgreSQL: function that returns the ISO week number of a date\nCREATE OR REPLACE FUNCTION iso_week(",
], temperature=0, max_tokens=200))
add("code", "fp16", "Kubernetes manifest at low temperature; YAML must be valid.", chat(
    "Generate a Kubernetes Deployment and Service for image ghcr.io/acme/api:1.4.2, 3 replicas, port 8080, "
    "readiness probe on /ready, resources requests 250m/256Mi limits 1/512Mi.", temperature=0.2))

add("debug", "fp16", "Greedy debugging of a traceback; precise diagnosis and patch.", chat(
    "I get `RuntimeError: dictionary changed size during iteration` here:\n\n```python\nfor k, v in cache.items():"
    "\n    if v.expired():\n        del cache[k]\n```\nWhat's wrong and what's the fix?",
    sys=CODER, temperature=0))
add("debug", "fp16", "Refactoring at temperature 0 that must preserve behaviour.", chat(
    "Refactor this to be readable without changing behaviour:\n\n```python\ndef f(xs):\n    r=[]\n    for i in "
    "range(len(xs)):\n        if xs[i]%2==0 and i%2==1: r.append(xs[i]**2)\n        elif xs[i]<0: r.append(-xs[i])"
    "\n    return r\n```", sys=CODER, temperature=0, max_tokens=400))
add("debug", "fp16", "Multi-turn debugging session, greedy, with code in context.", chat(
    "My React component re-renders forever. `useEffect(() => { setItems(data.filter(d => d.active)) }, [data, "
    "items])`",
    "The effect depends on `items`, and it sets `items`, so every run schedules another. Remove `items` from the "
    "dependency array, or derive the filtered list with `useMemo` instead of state.",
    "Show me the useMemo version with TypeScript types for `data: Item[]`.",
    sys="You are a frontend engineer helping debug React apps.", temperature=0))
add("debug", "fp16", "Low-temperature fix of a failing SQL migration.", chat(
    "This Alembic migration fails on Postgres with `cannot cast type text to integer`: "
    "`op.alter_column('orders', 'qty', type_=sa.Integer())`. Write the corrected upgrade() and downgrade().",
    temperature=0.1, max_tokens=500))
add("debug", "fp16", "Greedy code review finding an off-by-one.", chat(
    "Find the bug:\n\n```c\nint sum(int *a, int n) {\n  int s = 0;\n  for (int i = 0; i <= n; i++) s += a[i];\n"
    "  return s;\n}\n```", temperature=0, parts=True))

add("json", "fp16", "Greedy extraction into a strict JSON schema.", chat(
    "Invoice text:\nACME GmbH, Rechnung Nr. 2024-0117, Datum 03.02.2024. 3x Widget A à 12,50 EUR; 1x Setup fee "
    "80,00 EUR. MwSt 19%. Zahlbar bis 17.02.2024.",
    sys="Extract the invoice fields. Use ISO dates and decimal numbers.", temperature=0,
    response_format=schema("invoice", {"vendor": S, "number": S, "date": S, "due_date": S, "currency": S,
                                       "line_items": A({"type": "object", "properties": {
                                           "description": S, "quantity": N, "unit_price": N},
                                           "required": ["description", "quantity", "unit_price"],
                                           "additionalProperties": False}),
                                       "vat_rate": N},
                           ["vendor", "number", "date", "due_date", "currency", "line_items", "vat_rate"])))
add("json", "fp16", "Resume parsing into JSON at temperature 0.", chat(
    "Jane Okafor — Senior Data Engineer at Northwind (2019–present), Data Analyst at Contoso (2016–2019). "
    "Skills: Spark, dbt, Airflow, Python, SQL. MSc Statistics, University of Lagos, 2015.",
    sys="Convert the resume to JSON with keys name, roles (title, company, start, end), skills, education.",
    temperature=0, response_format={"type": "json_object"}, max_tokens=400))
add("json", "fp16", "Structured entity extraction with a schema, greedy.", chat(
    "Extract every medication with dose and frequency: 'Patient continues metformin 500 mg twice daily, started "
    "atorvastatin 20 mg at night, stopped ibuprofen.'",
    sys="You extract structured data from clinical notes. Never guess values that are not in the text.",
    temperature=0, response_format=schema("meds", {"medications": A({"type": "object", "properties": {
        "name": S, "dose": S, "frequency": S, "status": {"type": "string", "enum": ["active", "started", "stopped"]}},
        "required": ["name", "dose", "frequency", "status"], "additionalProperties": False})}, ["medications"])))
add("json", "fp16", "Low temperature JSON classification with a fixed enum schema.", chat(
    "Ticket: 'I was charged twice for my March subscription and the app logs me out every hour.'",
    sys="Classify support tickets. A ticket can have several categories.", temperature=0.2,
    response_format=schema("ticket", {"categories": A({"type": "string", "enum": [
        "billing", "login", "bug", "feature_request", "account", "other"]}), "urgency": {
        "type": "string", "enum": ["low", "medium", "high"]}}, ["categories", "urgency"])))
add("json", "fp16", "Greedy JSON from a product description for a catalogue import.", chat(
    "Trail running shoe, men's, sizes 40-46, colors: black/lime, navy. 8 mm drop, 285 g (size 42), Vibram "
    "outsole. Price 139.90 EUR.",
    sys="Return a JSON object with fields: category, gender, sizes (array of numbers), colors, drop_mm, "
        "weight_g, outsole, price {amount, currency}. JSON only.", temperature=0,
    response_format={"type": "json_object"}))
add("json", "fp16", "Structured meeting-notes extraction, greedy, with nested schema.", chat(
    "Notes: Kickoff 12 May. Priya owns the data migration, due 30 May. Tom to draft the API spec by Friday. "
    "Open question: do we keep the legacy CSV export? Decision: launch is in the EU region first.",
    temperature=0, response_format=schema("minutes", {
        "action_items": A({"type": "object", "properties": {"owner": S, "task": S, "due": S},
                           "required": ["owner", "task", "due"], "additionalProperties": False}),
        "decisions": A(S), "open_questions": A(S)}, ["action_items", "decisions", "open_questions"])))

WEATHER_TOOLS = [tool("get_weather", "Current weather for a city", {"city": S, "unit": {
    "type": "string", "enum": ["celsius", "fahrenheit"]}}, ["city"])]
add("tools", "fp16", "Tool call at temperature 0; arguments must be valid JSON.", chat(
    "Do I need an umbrella in Rotterdam right now?", temperature=0, tools=WEATHER_TOOLS, tool_choice="auto"))
add("tools", "fp16", "Greedy multi-tool call for a booking flow.", chat(
    "Book me a table for 4 at an Italian place near Union Square tomorrow at 7:30pm, and add it to my calendar.",
    sys="You are a concierge assistant. Use the tools; never invent confirmation numbers.", temperature=0,
    tools=[tool("search_restaurants", "Search restaurants", {"cuisine": S, "near": S, "party_size": I,
                                                              "time": S}, ["near"]),
           tool("create_reservation", "Reserve a table", {"restaurant_id": S, "party_size": I, "time": S},
                ["restaurant_id", "party_size", "time"]),
           tool("add_calendar_event", "Add an event", {"title": S, "start": S, "location": S},
                ["title", "start"])]))
add("tools", "fp16", "Tool result already in context; greedy follow-up call.", {
    "model": MODEL, "temperature": 0, "messages": [
        {"role": "system", "content": "You are an operations assistant for an online shop."},
        {"role": "user", "content": "Refund order 88213 if it was delivered damaged."},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function", "function": {
            "name": "get_order", "arguments": "{\"order_id\": \"88213\"}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "{\"status\": \"delivered\", \"damage_report\": true, "
                                                              "\"amount\": 42.90, \"currency\": \"EUR\"}"}],
    "tools": [tool("get_order", "Look up an order", {"order_id": S}, ["order_id"]),
              tool("issue_refund", "Refund an order", {"order_id": S, "amount": N, "reason": S},
                   ["order_id", "amount", "reason"])]})
add("tools", "fp16", "Forced tool choice, greedy, for a CRM update.", chat(
    "Log a call with Marta Ruiz from Finlogic: discussed renewal, she wants a quote for 25 seats by next week.",
    temperature=0, tools=[tool("log_activity", "Log CRM activity", {"contact": S, "company": S, "type": {
        "type": "string", "enum": ["call", "email", "meeting"]}, "summary": S, "follow_up_date": S},
        ["contact", "type", "summary"])],
    tool_choice={"type": "function", "function": {"name": "log_activity"}}))
add("tools", "fp16", "Low-temperature agent step choosing between tools.", chat(
    "What's 17% of our Q3 revenue? Q3 revenue is in the finance sheet.",
    sys="You are a finance analyst agent. Use tools for data and arithmetic.", temperature=0.1,
    tools=[tool("read_sheet", "Read a cell range", {"sheet": S, "range": S}, ["sheet", "range"]),
           tool("calculator", "Evaluate an arithmetic expression", {"expression": S}, ["expression"])]))

SQL_SYS = ("You write PostgreSQL. Schema: customers(id, name, country, created_at), orders(id, customer_id, "
           "total_cents, status, created_at), order_items(order_id, sku, qty, price_cents).")
add("sql", "fp16", "Greedy SQL generation against a given schema.", chat(
    "Top 10 customers by revenue in 2024 from delivered orders, with their country.", sys=SQL_SYS, temperature=0))
add("sql", "fp16", "SQL with window functions at temperature 0.", chat(
    "For each month of 2024, the month-over-month growth in order count as a percentage.", sys=SQL_SYS,
    temperature=0, max_tokens=300))
add("sql", "fp16", "Greedy SQL fix; exact syntax.", chat(
    "Why does this fail and how do I fix it? `SELECT country, COUNT(*) FROM customers WHERE COUNT(*) > 5 GROUP BY "
    "country;`", sys=SQL_SYS, temperature=0))
add("sql", "fp16", "Text-to-SQL completion prompt, greedy.", comp(
    "-- SQLite schema: employees(id, name, dept_id, salary, hired_on); depts(id, name)\n-- Question: the highest"
    " paid employee in each department, ties included\nSELECT", temperature=0, max_tokens=150, stop=[";"]))

MATH_SYS = "Solve step by step. Put the final answer on the last line as 'Answer: <value>'."
add("math", "fp16", "Greedy step-by-step math word problem.", chat(
    "A train leaves at 08:40 going 96 km/h. A second train leaves the same station at 09:10 going 120 km/h on "
    "the same track. At what time does the second train catch up?", sys=MATH_SYS, temperature=0))
add("math", "fp16", "Step-by-step percentages at low temperature.", chat(
    "A jacket costs $180. It's discounted 25%, then an extra 10% off the discounted price at checkout, then 8% "
    "sales tax. What do I pay?", sys=MATH_SYS, temperature=0.2))
add("math", "fp16", "Greedy probability reasoning; chains of steps amplify errors.", chat(
    "Two dice are rolled. Given that at least one shows a 6, what's the probability that the sum is at least 10? "
    "Show your reasoning step by step.", temperature=0))
add("math", "fp16", "Greedy algebra with exact answer.", chat(
    "Solve for x: 3(2x - 5) + 4 = 2(x + 7) - 1. Show each step.", temperature=0, max_tokens=300, parts=True))
add("math", "fp16", "Loan amortisation math at temperature 0.", chat(
    "I borrow 250,000 at 4.2% annual interest, monthly payments over 25 years. What is the monthly payment, and "
    "how much interest do I pay in total? Walk through the formula.", sys=MATH_SYS, temperature=0))
add("math", "fp16", "Logic puzzle with step-by-step reasoning, greedy.", chat(
    "Alice, Bob and Carol each own one pet: a cat, a dog, a parrot. Alice doesn't own the dog. The parrot's "
    "owner is older than Bob. Carol is the youngest. Who owns which pet? Reason step by step.", temperature=0))
add("math", "fp16", "Few-shot arithmetic completion at temperature 0.", comp(
    "Q: Sam has 3 boxes with 12 pencils each and gives away 9. How many left?\nA: 3*12 = 36; 36-9 = 27. "
    "The answer is 27.\n\nQ: A recipe needs 250 g flour per 6 cookies. How much flour for 45 cookies?\nA:",
    temperature=0, max_tokens=120, stop=["\n\nQ:"]))

add("long", "fp16", "Detailed 3000-word report: compounding error over a long output.", chat(
    "Write a detailed 3000-word report on the state of grid-scale battery storage in Europe: technologies, "
    "costs, policy, the main projects, and risks. Use headings.",
    sys="You are an energy-market analyst writing for a board of directors.", temperature=0.7, max_tokens=4000))
add("long", "fp16", "Long technical design doc (> 1000 tokens) with precise content.", chat(
    "Write a design document for migrating our monolith's session storage from in-memory to Redis: goals, "
    "non-goals, architecture, failure modes, rollout plan, and a test plan.", temperature=0.3, max_tokens=2500))
add("long", "fp16", "Very long structured output: a full course syllabus.", chat(
    "Create a complete 12-week syllabus for an intro to machine learning course: weekly topics, readings, "
    "learning objectives, assignments with rubrics, and the final project spec.", max_tokens=3000))
add("long", "fp16", "Long code output; many tokens of exact syntax.", chat(
    "Generate a complete Flask REST API for a todo app with SQLAlchemy models, CRUD endpoints, input validation, "
    "pagination, error handlers and pytest tests. Put each file in its own code block.",
    sys=CODER, temperature=0.2, max_tokens=3500))
add("long", "fp16", "Long legal-style document where errors accumulate.", chat(
    "Draft a full mutual non-disclosure agreement between two software companies under English law, with "
    "definitions, obligations, exclusions, term, remedies and boilerplate clauses.",
    sys="You are a contracts assistant. Produce complete documents, not outlines.", max_tokens=2000))
add("long", "fp16", "Long multi-section analysis over 1000 tokens.", chat(
    "Write an in-depth competitive analysis of three project-management SaaS tools (Asana, Linear, Jira) for a "
    "50-person engineering org: features, pricing, integrations, migration cost, and a recommendation. "
    "Aim for about 2000 words.", temperature=0.5, max_tokens=3000))
add("long", "fp16", "Long translation of a whole document.", chat(
    "Translate this employee handbook chapter into German, keeping headings and lists intact:\n\n"
    "## Remote work\nEmployees may work remotely up to three days a week. Core hours are 10:00-15:00 in your "
    "team's home time zone; outside them, reply within one business day.\n\n### Equipment\n- A laptop and one "
    "monitor are provided.\n- Up to 300 EUR a year is reimbursed for a desk chair or headset, with receipt.\n\n"
    "### Security\n- Use the VPN for every internal system.\n- Never work on confidential data in public places.\n"
    "- Report a lost device to IT within 24 hours.\n\n### Working abroad\nWorking from another country for more "
    "than 10 days a year needs HR approval in advance, because of tax and insurance rules.\n\n## Travel\nBook "
    "travel through the portal at least 14 days ahead. Economy class is the default; flights over 6 hours may be "
    "booked in premium economy. Daily allowances follow the national rates...",
    sys="You are a professional translator (EN→DE).", temperature=0.2, max_tokens=3200))
add("long", "fp16", "Long step-by-step tutorial with commands and code.", chat(
    "Write a step-by-step tutorial, with every command, for setting up a three-node PostgreSQL cluster with "
    "Patroni and etcd on Ubuntu 24.04, including failover testing.", temperature=0.4, max_tokens=2500))

add("prio", "fp16", "Priority 9 header: operator pins top-priority traffic to fp16.", chat(
    "Summarise this incident timeline for the executive update: 14:02 alerts fire on checkout latency; 14:09 "
    "on-call identifies DB connection pool exhaustion; 14:21 pool size raised; 14:30 latency normal.",
    temperature=0.3, max_tokens=200), x_priority="9")
add("prio", "fp16", "Priority 10 request from the enterprise tier.", chat(
    "Draft a polite reply to a customer who asks whether we can extend their trial by two weeks.",
    sys="You are Acme's account management assistant."), x_priority="10")
add("prio", "fp16", "Priority 9 overrides an otherwise tolerant chat.", chat(
    "hey, quick one: what's a good name for our team's Friday demo slot?", temperature=0.9), x_priority="9")
add("prio", "fp16", "Priority 9 with a latency budget; priority still wins.", chat(
    "What are the side effects of amoxicillin I should tell the patient about?",
    sys="You assist pharmacists. Be accurate and concise."), x_priority="9", x_latency_budget_ms="800")
add("prio", "fp16", "Client floor x-min-tier fp16 on a plain question.", chat(
    "Explain in two paragraphs what a content delivery network does."), x_min_tier="fp16")
add("prio", "fp16", "x-min-tier fp16 from an eval harness replaying a baseline.", chat(
    "Write a haiku about autumn rain.", temperature=1.0), x_min_tier="fp16")
add("prio", "fp16", "x-min-tier fp16 on a summarisation job.", comp(
    "Summarise in one sentence: The city council voted 7-2 to extend the bike lane network by 40 km over three "
    "years, funded by a parking levy.\nSummary:", max_tokens=60), x_min_tier="fp16")

# ---------------------------------------------------------------------------------------------------------
# fp8: precise work without greedy decoding; priority 7-8; low-temperature translation; prose of 800-1000 tokens
# ---------------------------------------------------------------------------------------------------------
add("code", "fp8", "Code at moderate temperature: precise but not greedy.", chat(
    "Write a Python script that watches a folder and uploads new images to an S3 bucket, with retries.",
    sys=CODER, temperature=0.5, max_tokens=700))
add("code", "fp8", "Code request with default temperature.", chat(
    "How do I read a large CSV in pandas in chunks and compute a running mean of one column? Show code."))
add("code", "fp8", "Explaining code with snippets at 0.6.", chat(
    "Explain Python's asyncio.gather vs asyncio.TaskGroup with a short example of each.", temperature=0.6))
add("code", "fp8", "Code suggestions at 0.7: several alternatives wanted.", chat(
    "Give me three different ways to deduplicate a list of dicts by the 'email' key in Python, preserving "
    "order.", temperature=0.7, max_tokens=500))
add("code", "fp8", "Regex help at default temperature.", chat(
    "regex to pull the version number out of strings like 'release-v2.14.3-rc1'?", parts=True))
add("json", "fp8", "JSON output without greedy decoding.", chat(
    "Give me 5 sample user records for a test fixture: name, email, signup_date, plan (free/pro/team).",
    temperature=0.7, response_format={"type": "json_object"}))
add("json", "fp8", "Structured extraction at moderate temperature.", chat(
    "Pull out the company names and funding amounts from: 'Lumen raised $12M led by Index; Quillo closed a "
    "€4.5M seed; Tarn announced a $30M Series B.'", sys="Answer in JSON.", temperature=0.4,
    response_format={"type": "json_object"}))
add("tools", "fp8", "Tool call at default temperature.", chat(
    "Remind me to call the dentist tomorrow at 10.", tools=[tool(
        "create_reminder", "Create a reminder", {"text": S, "at": S}, ["text", "at"])]))
add("math", "fp8", "Math explanation at 0.5: precise but sampled.", chat(
    "Explain why the derivative of e^x is e^x, with a short worked example.", temperature=0.5, max_tokens=400))
add("math", "fp8", "Word problem at 0.6.", chat(
    "If I save 350 a month at 5% annual interest compounded monthly, roughly how much will I have in 10 years?",
    temperature=0.6))
add("math", "fp8", "Step-by-step statistics at 0.4.", chat(
    "Walk me through a two-sample t-test for these groups: A = 12, 15, 14, 10, 13; B = 16, 18, 15, 17, 19.",
    temperature=0.4))
add("sql", "fp8", "SQL at moderate temperature with alternatives.", chat(
    "What are a couple of ways to find duplicate emails in a users table in MySQL?", temperature=0.5))
add("prio", "fp8", "Priority 8 on ordinary support work.", chat(
    "A customer says their export to CSV is empty. What should I check first?",
    sys="You help support agents of a B2B analytics product."), x_priority="8")
add("prio", "fp8", "Priority 7 summarisation for an account manager.", chat(
    "Summarise the customer's last three emails: they want SSO, they're unhappy with response times, and they "
    "are evaluating a competitor.", temperature=0.3), x_priority="7")
add("prio", "fp8", "Priority 8 on a conversational request.", chat(
    "Give me a short, friendly welcome message for new users of our budgeting app.", temperature=0.8),
    x_priority="8")
add("prio", "fp8", "Priority 7 neutral Q&A.", chat(
    "What's the difference between a Roth IRA and a traditional IRA?"), x_priority="7")
add("prio", "fp8", "Client floor x-min-tier fp8 on a creative request.", chat(
    "Write a limerick about a cat who learns to code.", temperature=1.0), x_min_tier="fp8")
add("i18n", "fp8", "Precise translation at low temperature.", chat(
    "Translate to Spanish, keeping the legal meaning exact: 'The Licensee shall not sublicense the Software "
    "without prior written consent.'", sys="You are a legal translator.", temperature=0.1))
add("i18n", "fp8", "German technical translation at temperature 0.", chat(
    "Übersetze ins Englische: 'Die Wartung der Anlage erfolgt ausschließlich durch geschultes Fachpersonal; "
    "vor Arbeiten ist die Stromzufuhr zu unterbrechen.'", temperature=0))
add("i18n", "fp8", "Japanese localisation of UI strings at low temperature.", chat(
    "Translate these UI strings to Japanese, keep placeholders: 'Welcome back, {name}!', 'You have {n} unread "
    "messages', 'Your session expires in {minutes} minutes.'", temperature=0.2,
    sys="You localise software UIs. Keep {placeholders} unchanged."))
add("i18n", "fp8", "Chinese medical leaflet sentence translated at low temperature.", chat(
    "请把这句话翻译成英文：'每日两次，每次一片，饭后服用。如出现皮疹请立即停药。'", temperature=0.2))
add("i18n", "fp8", "French contract clause translated greedily, prose not code.", chat(
    "Translate into French: 'Either party may terminate this Agreement with thirty (30) days' written notice.'",
    temperature=0))
add("i18n", "fp8", "Hindi translation of a precise instruction at low temperature.", chat(
    "Translate into Hindi: 'Enter the 6-digit code we sent to your phone. The code expires in 10 minutes.'",
    temperature=0.2))
add("long", "fp8", "Prose of about 900 tokens: long but not over 1000.", chat(
    "Write a 700-word blog post about why small teams should write postmortems, in a friendly tone.",
    temperature=0.7, max_tokens=1000))
add("long", "fp8", "Long-ish newsletter prose, 800-1000 tokens.", chat(
    "Write our monthly customer newsletter: new dark mode, faster sync, a webinar on the 14th, and a "
    "customer story from a bakery chain. Around 600 words.", max_tokens=900))
add("long", "fp8", "Essay around 700 words at moderate temperature.", chat(
    "Write an essay of about 700 words on the history of the printing press and its effect on literacy.",
    temperature=0.6, max_tokens=1000))
add("long", "fp8", "Detailed product explanation, ~800 tokens.", chat(
    "Explain to a new hire, in detail, how our refund process works from request to payout, as a narrative "
    "walkthrough.", sys="You are an internal onboarding assistant for an e-commerce company.", max_tokens=850))

# ---------------------------------------------------------------------------------------------------------
# int8: ordinary assistant work at default temperature
# ---------------------------------------------------------------------------------------------------------
ARTICLE = ("Researchers at the University of Copenhagen found that office workers who took a 10-minute walk "
           "after lunch reported 20% less afternoon fatigue over a six-week study of 240 participants. The effect "
           "was strongest in people with sedentary jobs. The authors caution that the study relied on "
           "self-reported fatigue and did not measure productivity directly.")
add("summ", "int8", "Plain summarisation at default temperature.", chat(
    f"Summarise in two sentences:\n\n{ARTICLE}"))
add("summ", "int8", "Bullet summary of a meeting transcript.", chat(
    "Summarise as 3 bullets: 'Ana: we're behind on the mobile release. Raj: QA found 12 blockers, 8 fixed. "
    "Ana: can we ship Friday? Raj: if the payment bug is fixed by Wednesday. Li: I'll pair with Raj on it.'",
    sys="You summarise meetings for busy managers."))
add("summ", "int8", "TL;DR of a long email.", chat(
    "tl;dr this please: Hi all, following up on last week's offsite, we agreed to move the quarterly planning "
    "to the first week of each quarter, trial async standups for a month, and revisit the on-call rotation "
    "once the new hires have onboarded. Please send feedback on the async standups by the 20th.",
    temperature=0.5))
add("summ", "int8", "Completions-style summarisation.", comp(
    f"Article: {ARTICLE}\n\nOne-paragraph summary for a newsletter:", max_tokens=120))
add("summ", "int8", "Review summary for a product page.", chat(
    "Summarise these reviews into pros and cons: 'Battery lasts two days.' 'Strap broke after a month.' 'Great "
    "sleep tracking.' 'App is clunky.' 'Accurate heart rate on runs.'", temperature=0.3, max_tokens=200))
add("summ", "int8", "Summarise a support thread for hand-over.", chat(
    "Summarise this thread for the next agent: customer can't connect Shopify; we asked for the store URL; "
    "they sent it; we found the API token expired; they regenerated it but still see error 401.", parts=True))
add("summ", "int8", "Abstract-style summary at low temperature: prose, not structured.", chat(
    "Write a 3-sentence abstract of: 'We compare three caching strategies for a read-heavy API. Write-through "
    "cut p95 latency by 38%, cache-aside by 31%, and read-through by 35%, with write-through costing the most "
    "memory.'", temperature=0.2))

RAG_SYS = ("Answer the question using only the context. If the answer is not in the context, say you don't "
           "know.")
add("rag", "int8", "RAG answer grounded in context.", chat(
    "Context: Our Basic plan includes 3 projects and 5 GB storage. Pro includes unlimited projects and 100 GB. "
    "Team adds SSO and audit logs. All plans include email support; Pro and Team include chat support.\n\n"
    "Question: Can I get SSO on the Pro plan?", sys=RAG_SYS))
add("rag", "int8", "RAG over policy text.", chat(
    "Context: Employees accrue 2.08 vacation days per month. Unused days carry over up to 5 days into the next "
    "year. Carry-over days expire on March 31.\n\nQuestion: If I have 8 days left in December, how many carry "
    "over?", sys=RAG_SYS, temperature=0.3))
add("rag", "int8", "RAG answer with citations in prose.", chat(
    "[1] The Eiffel Tower was completed in 1889 for the World's Fair. [2] It was the tallest man-made structure "
    "until 1930. [3] It is repainted roughly every seven years.\n\nWhen did it stop being the tallest structure?"
    " Cite the passage.", sys=RAG_SYS))
add("rag", "int8", "Docs-search answer for a developer portal.", chat(
    "Context: Rate limits are 100 requests per minute per API key. Exceeding the limit returns HTTP 429 with a "
    "Retry-After header. Enterprise keys can request higher limits.\n\nQ: what happens if I send 150 requests "
    "in a minute?", sys=RAG_SYS, max_tokens=150))
add("rag", "int8", "Internal wiki Q&A.", chat(
    "Context: The VPN is required for the staging cluster but not for the docs site. Request VPN access in the "
    "#it-help channel.\n\nHow do I get to staging from home?", sys=RAG_SYS, parts=True))
add("rag", "int8", "RAG answer in a multi-turn chat.", chat(
    "Context: Store hours are 9-18 Mon-Fri, 10-16 Sat, closed Sun. Returns within 30 days with receipt.\n\n"
    "Are you open Sunday?",
    "No, the store is closed on Sundays. We're open 10:00-16:00 on Saturdays.",
    "ok and can I return something I bought 5 weeks ago?", sys=RAG_SYS))

add("qa", "int8", "Neutral factual question.", chat("What causes the seasons on Earth?"))
add("qa", "int8", "How-to question, no structured output.", chat(
    "How do I get red wine out of a cotton shirt?", sys="You are a helpful assistant."))
add("qa", "int8", "Explain a concept plainly.", chat(
    "Can you explain what inflation is to a 12-year-old?", temperature=0.5, max_tokens=250))
add("qa", "int8", "General knowledge at default settings.", chat("Who was Ada Lovelace and why is she famous?"))
add("qa", "int8", "Advice question, ordinary prose.", chat(
    "I'm starting to run. How many times a week should a beginner run, and how far?"))
add("qa", "int8", "Comparison question in prose.", chat(
    "What's the difference between a latte and a flat white?", temperature=0.6))

SUPPORT_SYS = ("You are the support assistant for Parcelo, a parcel delivery service. Be friendly, concise, and "
               "offer to escalate when you cannot help.")
add("support", "int8", "Customer support reply.", chat(
    "My parcel says delivered but it isn't here. Tracking PX-448812.", sys=SUPPORT_SYS))
add("support", "int8", "Support: change delivery address.", chat(
    "Can I change the delivery address after the parcel has shipped?", sys=SUPPORT_SYS, temperature=0.4))
add("support", "int8", "Support with an irritated customer, multi-turn.", chat(
    "This is the third time my delivery is late.",
    "I'm really sorry about that. Could you share your tracking number so I can look into what happened?",
    "PX-551027. I want compensation.", sys=SUPPORT_SYS))
add("support", "int8", "Support: password reset instructions.", chat(
    "I forgot my password and the reset email never arrives.",
    sys="You are the help desk assistant for a photo-sharing app."))
add("support", "int8", "Support: billing question in prose.", chat(
    "Why was I charged 9.99 when my plan says 7.99?",
    sys="You are the billing support assistant for a streaming service. Prices rose to 9.99 on 1 March; "
        "customers were emailed in January.", max_tokens=200))
add("support", "int8", "Support reply drafted for an agent.", chat(
    "Draft a reply to: 'Your app deleted all my notes after the update!!'",
    sys="You draft replies for support agents at a notes app. Be empathetic; mention the 30-day trash."))

CLASSIFY_SYS = "Classify the sentiment of the review as positive, negative or neutral. Reply with one word."
add("classify", "int8", "Short sentiment classification, default temperature.", chat(
    "The delivery was fast but the box was crushed.", sys=CLASSIFY_SYS))
add("classify", "int8", "One-word intent classification.", chat(
    "Message: 'how do I cancel my subscription'", sys="Classify the intent: cancel, upgrade, billing, "
                                                       "technical, other. One word.", max_tokens=5))
add("classify", "int8", "Language identification.", chat(
    "Which language is this: 'Hyvää huomenta, miten voit?'", max_tokens=10))
add("classify", "int8", "Spam check, short answer.", chat(
    "Is this spam? 'Congratulations!! You won a $500 gift card, click here to claim before midnight'",
    sys="Answer 'spam' or 'not spam', then one short reason."))
add("classify", "int8", "Topic tagging few-shot completion.", comp(
    "Headline: Central bank holds rates steady amid cooling inflation\nTopic: economy\n\nHeadline: Striker "
    "signs four-year deal with rivals\nTopic: sports\n\nHeadline: New battery chemistry doubles e-bike range\n"
    "Topic:", max_tokens=5))

add("i18n", "int8", "Short Spanish chat.", chat("¿Qué me recomiendas visitar en Sevilla en un día?"))
add("i18n", "int8", "Short German Q&A.", chat("Wie lange sollte man ein Ei kochen, damit es wachsweich ist?"))
add("i18n", "int8", "French everyday question.", chat(
    "Quelle est la différence entre 'tu' et 'vous' quand on écrit à un collègue ?"))
add("i18n", "int8", "Japanese casual question at default temperature.", chat("東京で雨の日におすすめの過ごし方は？"))
add("i18n", "int8", "Hindi neutral question.", chat("मुझे रोज़ कितना पानी पीना चाहिए?"))
add("i18n", "int8", "Chinese short assistant request.", chat("帮我写一条请假的微信消息，明天上午有事。", max_tokens=100))

# ---------------------------------------------------------------------------------------------------------
# int4: creative/conversational at temperature >= 0.7, chit-chat, low-priority unstructured batch, tight budgets
# ---------------------------------------------------------------------------------------------------------
STORY_SYS = "You are a playful storyteller."
add("creative", "int4", "Short story at high temperature.", chat(
    "Write a 300-word story about a lighthouse keeper who finds a message in a bottle addressed to her.",
    sys=STORY_SYS, temperature=1.0, max_tokens=450))
add("creative", "int4", "Poem at temperature 1.2.", chat(
    "A poem about the smell of rain on hot asphalt, free verse.", temperature=1.2))
add("creative", "int4", "Bedtime story, creative sampling.", chat(
    "Tell my 5-year-old a bedtime story about a sleepy dragon who can't find his pillow.", sys=STORY_SYS,
    temperature=0.9, max_tokens=400))
add("creative", "int4", "Sonnet, high temperature.", chat(
    "Write a Shakespearean sonnet about a cup of coffee going cold.", temperature=1.0))
add("creative", "int4", "Flash fiction with a twist.", chat(
    "Flash fiction, 150 words, sci-fi, with a twist ending.", temperature=1.1, max_tokens=250, parts=True))
add("creative", "int4", "Song lyrics at high temperature.", chat(
    "Write a chorus for an upbeat indie-pop song about moving to a new city.", temperature=1.0, max_tokens=150))
add("creative", "int4", "Creative completion continuing a story.", comp(
    "The last train out of Vienna was already moving when Elsa realised the suitcase wasn't hers.",
    temperature=0.9, max_tokens=300))
add("creative", "int4", "Haiku series, sampled.", chat("Three haiku about city pigeons.", temperature=0.8))
add("creative", "int4", "Fantasy character backstory.", chat(
    "Give my D&D character a backstory: half-orc bard, afraid of the sea, owes money to a gnome.",
    sys="You are a creative game-master assistant.", temperature=1.0, max_tokens=350))
add("creative", "int4", "Children's rhyme.", chat(
    "A short rhyming poem to help kids remember to brush their teeth.", temperature=0.9))
add("creative", "int4", "Birthday card message at high temperature.", chat(
    "Funny birthday message for my brother who's turning 40 and just took up cycling.", temperature=1.0,
    max_tokens=100))
add("creative", "int4", "Best-man speech draft, conversational and creative.", chat(
    "Help me write a warm, funny 2-minute best-man speech. The groom, Dan, once got us lost for 6 hours on a "
    "hike with a map he drew himself.", temperature=0.9, max_tokens=500))
add("creative", "int4", "Creative batch of opening lines as completions.", comp([
    "Opening line of a cozy mystery novel:",
    "Opening line of a space-opera novel:",
    "Opening line of a ghost story set in a laundromat:"], temperature=1.0, max_tokens=60))

add("brainstorm", "int4", "Slogan brainstorm at high temperature.", chat(
    "10 catchy slogans for a plant-based ice cream brand called Frosty Fern.", temperature=1.0))
add("brainstorm", "int4", "Product-name brainstorm.", chat(
    "Name ideas for a budgeting app aimed at students. Playful, short, available-sounding.",
    sys="You are a brand strategist.", temperature=1.1))
add("brainstorm", "int4", "Party ideas, conversational.", chat(
    "Ideas for a 30th birthday party theme that isn't cringe?", temperature=0.9))
add("brainstorm", "int4", "Instagram captions.", chat(
    "5 Instagram captions for a photo of our bakery's new cinnamon buns.", temperature=1.0, max_tokens=200))
add("brainstorm", "int4", "Team-building brainstorm.", chat(
    "Give me some fun remote team-building activities for 15 people, nothing that needs a budget.",
    temperature=0.8))
add("brainstorm", "int4", "Taglines for a podcast.", chat(
    "Taglines for a podcast about weird history facts, hosted by two sisters.", temperature=1.2,
    max_tokens=150))
add("brainstorm", "int4", "Gift ideas, casual.", chat(
    "gift ideas for my dad who likes gardening and jazz, under 50 euros", temperature=0.8, parts=True))
add("brainstorm", "int4", "Blog-post title ideas.", chat(
    "Come up with 8 clickable titles for a blog post about meal prepping on a budget.", temperature=1.0))
add("brainstorm", "int4", "Ad copy variants, sampled.", chat(
    "Write 4 short Facebook ad variations for a yoga studio's first-class-free offer.",
    sys="You are a copywriter for small local businesses.", temperature=0.9, max_tokens=300))
add("brainstorm", "int4", "Pet-name brainstorm.", chat(
    "We adopted a grumpy grey cat. Name suggestions?", temperature=1.0, max_tokens=80))

CASUAL_SYS = "You are Pip, a cheerful companion chatbot. Keep replies short and warm."
add("chat", "int4", "Casual greeting.", chat("hi! how's it going?", sys=CASUAL_SYS, temperature=0.8))
add("chat", "int4", "Small talk about the weekend.", chat(
    "Finally Friday. Any ideas for a lazy Saturday?", sys=CASUAL_SYS, temperature=0.9, max_tokens=120))
add("chat", "int4", "Chit-chat about a movie.", chat(
    "Just watched Dune Part Two. That sandworm ride!!", temperature=0.9))
add("chat", "int4", "Casual multi-turn banter.", chat(
    "I think pineapple on pizza is great, fight me",
    "Bold move! Sweet and salty is a classic combo. Ham and pineapple, or are you going full chaos with jalapeños?",
    "jalapeños obviously", sys=CASUAL_SYS, temperature=1.0))
add("chat", "int4", "Casual chat, default temperature, trivial answer.", chat(
    "lol my cat just knocked my coffee off the desk again", sys=CASUAL_SYS))
add("chat", "int4", "Companion chat.", chat(
    "I'm bored at the airport, my flight's delayed 3 hours. Entertain me?", sys=CASUAL_SYS, temperature=1.0))
add("chat", "int4", "Friendly chit-chat about food.", chat(
    "what's your favourite comfort food? mine's mac and cheese", temperature=0.8, max_tokens=80))
add("chat", "int4", "Encouragement, conversational.", chat(
    "I have a job interview tomorrow and I'm nervous, say something nice", sys=CASUAL_SYS, temperature=0.9))
add("chat", "int4", "Would-you-rather game.", chat(
    "Let's play would you rather. You start!", temperature=1.1, max_tokens=100))
add("chat", "int4", "Joke request.", chat("tell me a dad joke about cheese", temperature=1.0, max_tokens=60))
add("chat", "int4", "Chit-chat in list-of-parts content.", chat(
    "good morning! it's sunny here for once ☀️", sys=CASUAL_SYS, temperature=0.8, parts=True))
add("chat", "int4", "Trivial chat with a generous max_tokens ceiling; the output is short.", chat(
    "thanks, that's all for today!", sys=CASUAL_SYS, temperature=0.8, max_tokens=2048))
add("chat", "int4", "SDK default ceiling on a greeting; length is not really requested.", chat(
    "hello there", temperature=0.7, max_tokens=4096))
add("roleplay", "int4", "Role-play as a pirate, high temperature.", chat(
    "Arr, ye be the captain now. What be our next adventure?",
    sys="You are Captain Saltbeard, a dramatic pirate. Stay in character.", temperature=1.1))
add("roleplay", "int4", "Role-play NPC dialogue.", chat(
    "*walks into the tavern* Barkeep, what's the news around town?",
    sys="You are a gruff innkeeper NPC in a fantasy game.", temperature=1.0, max_tokens=150))
add("roleplay", "int4", "Role-play tutor banter in character.", chat(
    "Pretend you're a sarcastic medieval knight reacting to smartphones.", temperature=1.2, max_tokens=200))
add("roleplay", "int4", "Improvised dialogue.", chat(
    "Write a silly dialogue between a toaster and a fridge arguing about who's more important.",
    temperature=1.0))
add("roleplay", "int4", "Continuing a role-play, multi-turn.", chat(
    "You're a detective in 1920s Chicago. I'm your nervous informant.",
    "*leans back, tips hat* Easy, kid. Nobody followed you, right? Spill it — what did you see at the docks?",
    "I-I saw a truck... full of crates marked 'pickles'. But it smelled like gin.",
    temperature=1.0, max_tokens=200))

BATCH = {"x_priority": "2"}
add("batch", "int4", "Low-priority batch rewrite of product blurbs.", chat(
    "Rewrite this product blurb to sound friendlier: 'Stainless steel bottle. 750 ml. Keeps drinks cold 24 h.'",
    temperature=0.7), **BATCH)
add("batch", "int4", "Priority 1 nightly paraphrase job.", comp(
    "Paraphrase: 'Our team will get back to you within two business days.'\nParaphrase:", max_tokens=40),
    x_priority="1")
add("batch", "int4", "Priority 3 batch of alt-text suggestions.", chat(
    "Suggest alt text for a photo described as: a golden retriever lying on a kitchen floor next to a spilled "
    "bag of flour.", max_tokens=60), x_priority="3")
add("batch", "int4", "Low-priority email subject line variants.", chat(
    "Give 5 subject lines for a spring sale email from a garden centre.", temperature=0.9), **BATCH)
add("batch", "int4", "Priority 1 backfill of short product descriptions.", comp([
    "Short product description for: ceramic mug, matte green, 350 ml:",
    "Short product description for: wool beanie, charcoal, one size:"], max_tokens=60, temperature=0.8),
    x_priority="1")
add("batch", "int4", "Priority 2 batch of friendly rephrasings for notifications.", chat(
    "Make this notification sound warmer: 'Your subscription will renew on 5 June.'", max_tokens=50), **BATCH)
add("batch", "int4", "Priority 3 bulk rewrite of tweets.", chat(
    "Rewrite in a more casual tone: 'We are pleased to announce the opening of our new location.'",
    temperature=0.8), x_priority="3")
add("batch", "int4", "Priority 2 batch of recipe intros.", chat(
    "Write a two-sentence intro for a recipe of lemon-garlic roast chicken.", temperature=0.9), **BATCH)

FAST = {"x_latency_budget_ms": "300"}
add("fast", "int4", "Tight latency budget on a one-line chat.", chat(
    "what's a good synonym for 'happy'?", max_tokens=20), **FAST)
add("fast", "int4", "Autocomplete suggestion with a 200 ms budget.", comp(
    "Sounds good, see you", max_tokens=8, temperature=0.7), x_latency_budget_ms="200")
add("fast", "int4", "Quick reply suggestions under a tight budget.", chat(
    "Suggest 3 short replies to: 'Running 10 min late, sorry!'", max_tokens=40, temperature=0.8),
    x_latency_budget_ms="250")
add("fast", "int4", "Voice assistant small talk, 400 ms budget.", chat(
    "good night!", sys="You are a voice assistant. One short sentence.", max_tokens=30),
    x_latency_budget_ms="400")
add("fast", "int4", "Typing-assistant rephrase with a tight budget.", chat(
    "make this less formal: 'Please find attached the requested document.'", max_tokens=30), **FAST)
add("fast", "int4", "Emoji suggestion, 150 ms budget.", chat(
    "one emoji for 'we shipped it!'", max_tokens=5), x_latency_budget_ms="150")
add("fast", "int4", "In-game chat line, tight budget.", chat(
    "GG! that last round was wild", sys="You are a friendly in-game companion.", max_tokens=30,
    temperature=1.0), x_latency_budget_ms="350")
add("fast", "int4", "Smart-compose completion under 300 ms.", comp(
    "Hi Sarah,\n\nThanks for the quick turnaround on", max_tokens=16, temperature=0.7), **FAST)

add("i18n", "int4", "Spanish creative poem at high temperature.", chat(
    "Escríbeme un poema corto sobre el mar en invierno.", temperature=1.0))
add("i18n", "int4", "German casual banter.", chat(
    "Na, was geht? Mir ist langweilig, erzähl mir was Lustiges.", temperature=0.9, max_tokens=150))
add("i18n", "int4", "French slogan brainstorm.", chat(
    "Trouve-moi 5 slogans pour une boulangerie de quartier.", temperature=1.0))
add("i18n", "int4", "Japanese casual chit-chat at high temperature.", chat(
    "今日は疲れたー。なんか元気が出ること言って！", temperature=0.9, max_tokens=100))
add("i18n", "int4", "Hindi short story at high temperature.", chat(
    "एक छोटी सी मज़ेदार कहानी सुनाओ एक बंदर और एक ऊँट की।", temperature=1.0, max_tokens=300))
add("i18n", "int4", "Chinese casual chat.", chat("周末去哪儿玩比较好？随便聊聊", temperature=0.8))


def main() -> None:
    ids = [r["id"] for r in ROWS]
    assert len(ids) == len(set(ids)), "duplicate ids"
    lines = [json.dumps(r, ensure_ascii=False) for r in ROWS]
    assert len(set(json.dumps(r["body"], sort_keys=True) for r in ROWS)) == len(ROWS), "duplicate bodies"
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text("\n".join(lines) + "\n", encoding="utf-8")
    counts = Counter(r["expected_tier"] for r in ROWS)
    total = len(ROWS)
    print(f"{total} rows -> {OUT}")
    for tier in ("fp16", "fp8", "int8", "int4"):
        print(f"  {tier:5} {counts[tier]:4}  {counts[tier] / total:.0%}")


if __name__ == "__main__":
    main()
