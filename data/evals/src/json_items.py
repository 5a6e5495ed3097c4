"""JSON / tool-calling items: the answer is a tool call {"name", "arguments"} (or a JSON object) that must
validate against a JSON schema and name the right tool with the right arguments."""

import json

SYSTEM = ("You are a function-calling assistant. Available tools are described below. Reply with exactly one JSON "
          "object {\"name\": <tool>, \"arguments\": {...}} and no other text.\n\nTools:\n{tools}")

TOOLS = {
    "get_weather": {"type": "object", "required": ["city", "unit"], "additionalProperties": False,
                    "properties": {"city": {"type": "string", "minLength": 1},
                                   "unit": {"enum": ["celsius", "fahrenheit"]},
                                   "days": {"type": "integer", "minimum": 1, "maximum": 14}}},
    "create_calendar_event": {"type": "object", "required": ["title", "start", "duration_minutes"],
                              "additionalProperties": False,
                              "properties": {"title": {"type": "string", "minLength": 1},
                                             "start": {"type": "string",
                                                       "pattern": "^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}$"},
                                             "duration_minutes": {"type": "integer", "minimum": 5},
                                             "attendees": {"type": "array", "items": {"type": "string",
                                                                                      "pattern": "^[^@\\s]+@[^@\\s]+$"}}}},
    "search_orders": {"type": "object", "required": ["customer_id"], "additionalProperties": False,
                      "properties": {"customer_id": {"type": "string", "pattern": "^C\\d{6}$"},
                                     "status": {"enum": ["pending", "shipped", "delivered", "cancelled", "refunded"]},
                                     "since": {"type": "string", "pattern": "^\\d{4}-\\d{2}-\\d{2}$"},
                                     "limit": {"type": "integer", "minimum": 1, "maximum": 100}}},
    "convert_currency": {"type": "object", "required": ["amount", "from", "to"], "additionalProperties": False,
                         "properties": {"amount": {"type": "number", "exclusiveMinimum": 0},
                                        "from": {"type": "string", "pattern": "^[A-Z]{3}$"},
                                        "to": {"type": "string", "pattern": "^[A-Z]{3}$"}}},
    "scale_deployment": {"type": "object", "required": ["deployment", "replicas"], "additionalProperties": False,
                         "properties": {"deployment": {"type": "string", "minLength": 1},
                                        "replicas": {"type": "integer", "minimum": 0, "maximum": 64},
                                        "namespace": {"type": "string"}}},
    "send_email": {"type": "object", "required": ["to", "subject", "body"], "additionalProperties": False,
                   "properties": {"to": {"type": "array", "minItems": 1,
                                         "items": {"type": "string", "pattern": "^[^@\\s]+@[^@\\s]+$"}},
                                  "subject": {"type": "string", "minLength": 1},
                                  "body": {"type": "string", "minLength": 1},
                                  "priority": {"enum": ["low", "normal", "high"]}}},
}

TOOL_DOCS = "\n".join(f"- {name}: arguments schema {json.dumps(schema)}" for name, schema in TOOLS.items())


def call_schema(tool: str) -> dict:
    return {"type": "object", "required": ["name", "arguments"], "additionalProperties": False,
            "properties": {"name": {"const": tool}, "arguments": TOOLS[tool]}}


# (id, user request, tool, reference arguments, expected subset of arguments, wrong answer or None)
# A wrong answer is either a well-formed call with a wrong argument (graded invalid = False) or a call that
# breaks the schema; None lets the simulator corrupt the JSON itself.
CALLS = [
    ("json-weather-lisbon", "What's the weather going to be like in Lisbon for the next 3 days? Use Celsius.",
     "get_weather", {"city": "Lisbon", "unit": "celsius", "days": 3}, {"city": "Lisbon", "unit": "celsius", "days": 3},
     {"city": "Lisbon", "unit": "celsius", "days": 7}),
    ("json-weather-denver-f", "Is it cold in Denver right now? I think in Fahrenheit.",
     "get_weather", {"city": "Denver", "unit": "fahrenheit"}, {"city": "Denver", "unit": "fahrenheit"},
     {"city": "Denver", "unit": "F"}),
    ("json-weather-two-weeks", "Give me the two-week forecast for Osaka in celsius.",
     "get_weather", {"city": "Osaka", "unit": "celsius", "days": 14}, {"city": "Osaka", "days": 14},
     None),
    ("json-event-standup", "Put a 15 minute 'Daily standup' on my calendar for 2025-03-03 at 09:30.",
     "create_calendar_event", {"title": "Daily standup", "start": "2025-03-03T09:30", "duration_minutes": 15},
     {"start": "2025-03-03T09:30", "duration_minutes": 15},
     {"title": "Daily standup", "start": "2025-03-03 9:30am", "duration_minutes": 15}),
    ("json-event-review", "Schedule 'Quarterly review' on 2025-04-10 from 14:00 to 15:30 with ana@example.com and li@example.com.",
     "create_calendar_event", {"title": "Quarterly review", "start": "2025-04-10T14:00", "duration_minutes": 90,
                               "attendees": ["ana@example.com", "li@example.com"]},
     {"start": "2025-04-10T14:00", "duration_minutes": 90, "attendees": ["ana@example.com", "li@example.com"]},
     {"title": "Quarterly review", "start": "2025-04-10T14:00", "duration_minutes": 60,
      "attendees": ["ana@example.com", "li@example.com"]}),
    ("json-event-dentist", "Remind me: dentist appointment on 2025-06-18 at 08:15, it takes about 45 minutes.",
     "create_calendar_event", {"title": "Dentist appointment", "start": "2025-06-18T08:15", "duration_minutes": 45},
     {"start": "2025-06-18T08:15", "duration_minutes": 45},
     None),
    ("json-orders-shipped", "Show shipped orders for customer C104233.",
     "search_orders", {"customer_id": "C104233", "status": "shipped"}, {"customer_id": "C104233", "status": "shipped"},
     {"customer_id": "C104233", "status": "delivered"}),
    ("json-orders-since", "List up to 20 orders of customer C000817 placed since 2024-11-01.",
     "search_orders", {"customer_id": "C000817", "since": "2024-11-01", "limit": 20},
     {"customer_id": "C000817", "since": "2024-11-01", "limit": 20},
     {"customer_id": "817", "since": "2024-11-01", "limit": 20}),
    ("json-orders-refunded", "Which orders of customer C550021 were refunded?",
     "search_orders", {"customer_id": "C550021", "status": "refunded"}, {"customer_id": "C550021", "status": "refunded"},
     None),
    ("json-orders-cancelled-limit", "Get the 5 most recent cancelled orders for C987654.",
     "search_orders", {"customer_id": "C987654", "status": "cancelled", "limit": 5},
     {"customer_id": "C987654", "status": "cancelled", "limit": 5},
     {"customer_id": "C987654", "status": "cancelled", "limit": "5"}),
    ("json-currency-eur-usd", "How much is 250 euros in US dollars?",
     "convert_currency", {"amount": 250, "from": "EUR", "to": "USD"}, {"amount": 250, "from": "EUR", "to": "USD"},
     {"amount": 250, "from": "USD", "to": "EUR"}),
    ("json-currency-yen", "Convert 12,500 Japanese yen to British pounds.",
     "convert_currency", {"amount": 12500, "from": "JPY", "to": "GBP"}, {"amount": 12500, "from": "JPY", "to": "GBP"},
     {"amount": 12.5, "from": "JPY", "to": "GBP"}),
    ("json-currency-chf", "I have 80.50 Swiss francs, what is that in euros?",
     "convert_currency", {"amount": 80.5, "from": "CHF", "to": "EUR"}, {"amount": 80.5, "from": "CHF", "to": "EUR"},
     None),
    ("json-scale-up", "Scale the deployment 'checkout-api' in namespace 'prod' to 6 replicas.",
     "scale_deployment", {"deployment": "checkout-api", "replicas": 6, "namespace": "prod"},
     {"deployment": "checkout-api", "replicas": 6, "namespace": "prod"},
     {"deployment": "checkout-api", "replicas": 6, "namespace": "production"}),
    ("json-scale-zero", "Turn off the 'batch-reindex' deployment completely (scale it to zero).",
     "scale_deployment", {"deployment": "batch-reindex", "replicas": 0}, {"deployment": "batch-reindex", "replicas": 0},
     {"deployment": "batch-reindex", "replicas": -1}),
    ("json-email-incident", "Email oncall@example.com with subject 'Incident 4471 resolved' saying the database failover completed at 03:12 UTC. Mark it high priority.",
     "send_email", {"to": ["oncall@example.com"], "subject": "Incident 4471 resolved",
                    "body": "The database failover completed at 03:12 UTC.", "priority": "high"},
     {"to": ["oncall@example.com"], "subject": "Incident 4471 resolved", "priority": "high"},
     {"to": "oncall@example.com", "subject": "Incident 4471 resolved",
      "body": "The database failover completed at 03:12 UTC.", "priority": "high"}),
    ("json-email-two", "Send a low priority note to maria@example.org and tom@example.org, subject 'Lunch', body 'Pizza on Friday?'.",
     "send_email", {"to": ["maria@example.org", "tom@example.org"], "subject": "Lunch", "body": "Pizza on Friday?",
                    "priority": "low"},
     {"to": ["maria@example.org", "tom@example.org"], "subject": "Lunch", "priority": "low"},
     None),
]

# Plain JSON-object items (no tool wrapper): (id, request, schema, reference object, expected subset, wrong)
OBJECTS = [
    ("json-extract-invoice", "Extract the invoice as JSON with keys invoice_number (string), total (number), currency (ISO code) and due_date (YYYY-MM-DD):\n\"Invoice INV-20931 from Kestrel Supplies. Amount due: 1,284.60 EUR. Payment due by 15 May 2025.\"",
     {"type": "object", "required": ["invoice_number", "total", "currency", "due_date"], "additionalProperties": False,
      "properties": {"invoice_number": {"type": "string"}, "total": {"type": "number"},
                     "currency": {"type": "string", "pattern": "^[A-Z]{3}$"},
                     "due_date": {"type": "string", "pattern": "^\\d{4}-\\d{2}-\\d{2}$"}}},
     {"invoice_number": "INV-20931", "total": 1284.6, "currency": "EUR", "due_date": "2025-05-15"},
     {"invoice_number": "INV-20931", "total": 1284.6, "currency": "EUR", "due_date": "2025-05-15"},
     {"invoice_number": "INV-20931", "total": "1,284.60", "currency": "EUR", "due_date": "2025-05-15"}),
    ("json-extract-contact", "Return JSON {\"name\": string, \"email\": string, \"phone\": string or null} for this signature:\n\"Best, Priya Raman | Platform Team | priya.raman@example.net\"",
     {"type": "object", "required": ["name", "email", "phone"], "additionalProperties": False,
      "properties": {"name": {"type": "string"}, "email": {"type": "string", "pattern": "^[^@\\s]+@[^@\\s]+$"},
                     "phone": {"type": ["string", "null"]}}},
     {"name": "Priya Raman", "email": "priya.raman@example.net", "phone": None},
     {"name": "Priya Raman", "email": "priya.raman@example.net", "phone": None},
     {"name": "Priya Raman", "email": "priya.raman@example.net"}),
    ("json-classify-ticket", "Classify this support ticket as JSON {\"category\": one of billing|bug|feature_request|account, \"urgency\": one of low|medium|high}:\n\"I was charged twice for my March subscription and need the duplicate refunded before my card limit is hit tomorrow.\"",
     {"type": "object", "required": ["category", "urgency"], "additionalProperties": False,
      "properties": {"category": {"enum": ["billing", "bug", "feature_request", "account"]},
                     "urgency": {"enum": ["low", "medium", "high"]}}},
     {"category": "billing", "urgency": "high"}, {"category": "billing", "urgency": "high"},
     {"category": "billing", "urgency": "medium"}),
    ("json-list-entities", "List the cities mentioned, in order of appearance, as JSON {\"cities\": [..]}:\n\"We flew from Nairobi to Doha, spent two nights in Doha, then took the train from Milan to Zurich.\"",
     {"type": "object", "required": ["cities"], "additionalProperties": False,
      "properties": {"cities": {"type": "array", "items": {"type": "string"}}}},
     {"cities": ["Nairobi", "Doha", "Milan", "Zurich"]}, {"cities": ["Nairobi", "Doha", "Milan", "Zurich"]},
     {"cities": ["Nairobi", "Doha", "Doha", "Milan", "Zurich"]}),
    ("json-sentiment-scores", "Rate the sentiment of each review from -1 (negative) to 1 (positive) and return JSON {\"scores\": [number, number, number]}:\n1. \"Absolutely love it, battery lasts days.\"\n2. \"Broke after a week, support never answered.\"\n3. \"It's fine. Does what it says.\"",
     {"type": "object", "required": ["scores"], "additionalProperties": False,
      "properties": {"scores": {"type": "array", "minItems": 3, "maxItems": 3,
                                "items": {"type": "number", "minimum": -1, "maximum": 1}}}},
     {"scores": [0.9, -0.8, 0.2]}, None,
     {"scores": [0.9, -0.8, 0.2, 0.0]}),
]


def items() -> list[dict]:
    out = []
    system = SYSTEM.replace("{tools}", TOOL_DOCS)
    for item_id, request, tool, args, expect, wrong in CALLS:
        out.append({
            "id": item_id, "category": "json",
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": request}],
            "temperature": 0.0, "max_tokens": 200,
            "grader": {"type": "json_schema", "schema": call_schema(tool),
                       "expect": {"name": tool, "arguments": expect}},
            "reference": json.dumps({"name": tool, "arguments": args}),
            **({"wrong": json.dumps({"name": tool, "arguments": wrong})} if wrong is not None else {}),
            "tags": ["tool_call", tool],
        })
    for item_id, request, schema, ref, expect, wrong in OBJECTS:
        out.append({
            "id": item_id, "category": "json",
            "messages": [{"role": "system", "content": "Reply with JSON only, no prose, no code fences."},
                         {"role": "user", "content": request}],
            "temperature": 0.0, "max_tokens": 200,
            "grader": {"type": "json_schema", "schema": schema, **({"expect": expect} if expect else {})},
            "reference": json.dumps(ref),
            "wrong": json.dumps(wrong),
            "tags": ["extraction"],
        })
    return out
