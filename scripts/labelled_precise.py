"""Hand-written labelled requests, precise work: fp16 and fp8 (rubric in data/requests/README.md)."""

from labelled_common import MODEL, A, I, N, S, add, chat, comp, schema, tool

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
