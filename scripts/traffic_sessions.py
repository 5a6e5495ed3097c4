"""Hand-written multi-turn sessions for the traffic mixes, including ones that start tolerant and turn
sensitive (they exercise session pinning). Used by scripts/build_traffic_mixes.py."""

from __future__ import annotations

# --- multi-turn sessions ---------------------------------------------------------------------------------
# tag: "tolerant" (all tolerant), "pivot" (starts tolerant, turns sensitive), "sensitive", "neutral".
SESSIONS = [
    {"tag": "pivot", "system": "You are a friendly assistant for a small online shop's owner.",
     "params": {"temperature": 0.9},
     "turns": [
         {"user": "hiya! finally got a minute to breathe, crazy week at the shop", "class": "tolerant",
          "assistant": "Hi! Sounds like a whirlwind — busy is good for a shop, though. What kept you running?"},
         {"user": "spring sale. sold loads of ceramic mugs, people love the green ones apparently",
          "class": "tolerant",
          "assistant": "Green mugs for the win! Spring colours always do well. Are you thinking of restocking "
                       "them or trying a new glaze?"},
         {"user": "restocking. ok serious mode: write me the SQL for total mug sales by colour for April. tables: "
                  "orders(id, created_at), order_items(order_id, product_id, qty), products(id, name, colour, "
                  "category)", "class": "sensitive", "params": {"temperature": 0},
          "assistant": "SELECT p.colour, SUM(oi.qty) AS units\nFROM order_items oi\nJOIN orders o ON o.id = "
                       "oi.order_id\nJOIN products p ON p.id = oi.product_id\nWHERE p.category = 'mug'\n  AND "
                       "o.created_at >= '2024-04-01' AND o.created_at < '2024-05-01'\nGROUP BY p.colour\nORDER BY "
                       "units DESC;"},
         {"user": "and the same but revenue, price is in order_items.price_cents", "class": "sensitive",
          "params": {"temperature": 0}},
     ]},
    {"tag": "pivot", "system": "You are a helpful assistant.",
     "turns": [
         {"user": "I'm planning a weekend trip to Porto with friends, any fun ideas?", "class": "tolerant",
          "params": {"temperature": 1.0},
          "assistant": "Porto is great for a group! Do a port-wine cellar tour in Gaia, watch the sunset from "
                       "Jardim do Morro, ride the old tram 1 along the river, and grab francesinhas for dinner."},
         {"user": "love it. we're 5 people, can you split costs: hotel 540 for 2 nights, dinner 185, cellar tour "
                  "18 per person, and I paid everything. how much does each owe me? step by step",
          "class": "sensitive", "params": {"temperature": 0},
          "assistant": "Total = 540 + 185 + 5 × 18 = 540 + 185 + 90 = 815. Per person = 815 / 5 = 163. The "
                       "other four each owe you 163, so 652 in total."},
         {"user": "one friend skipped the tour. redo it", "class": "sensitive", "params": {"temperature": 0}},
     ]},
    {"tag": "pivot", "system": "You are Nova, a witty chat buddy for developers.",
     "params": {"temperature": 1.0},
     "turns": [
         {"user": "the deploy went fine on the first try today. suspicious.", "class": "tolerant",
          "assistant": "A first-try deploy? Either you're getting very good, or the bugs are biding their time. "
                       "I'd check the logs with one eye open."},
         {"user": "haha. speaking of logs, I need a Python function that parses nginx access log lines into a "
                  "dict (ip, time, method, path, status, bytes). regex please", "class": "sensitive",
          "params": {"temperature": 0},
          "assistant": "import re\n\nLINE = re.compile(r'(?P<ip>\\S+) \\S+ \\S+ \\[(?P<time>[^\\]]+)\\] "
                       "\"(?P<method>\\S+) (?P<path>\\S+) [^\"]*\" (?P<status>\\d{3}) (?P<bytes>\\d+|-)')\n\n"
                       "def parse(line: str) -> dict | None:\n    m = LINE.match(line)\n    if not m:\n        "
                       "return None\n    d = m.groupdict()\n    d['status'] = int(d['status'])\n    d['bytes'] = 0 "
                       "if d['bytes'] == '-' else int(d['bytes'])\n    return d"},
         {"user": "now group them by status and count, top 5 paths for 5xx", "class": "sensitive",
          "params": {"temperature": 0},
          "assistant": "from collections import Counter\n\ndef top_5xx_paths(lines):\n    rows = [r for r in "
                       "map(parse, lines) if r]\n    by_status = Counter(r['status'] for r in rows)\n    errors = "
                       "Counter(r['path'] for r in rows if r['status'] >= 500)\n    return by_status, "
                       "errors.most_common(5)"},
         {"user": "perfect. you're the best. ok back to slacking", "class": "tolerant"},
     ]},
    {"tag": "pivot", "system": "You are the assistant inside a note-taking app.",
     "turns": [
         {"user": "just had a long brainstorm with the team about our summer campaign, lots of ideas flying",
          "class": "tolerant", "params": {"temperature": 0.8},
          "assistant": "That sounds energising! Want me to help turn the ideas into something organised?"},
         {"user": "yes. ideas: beach cleanup sponsorship, a user photo contest, discount code SUMMER15, an "
                  "influencer collab with two cyclists. budget 12k. turn it into JSON with name, owner (tbd), "
                  "cost estimate, and status 'idea'", "class": "sensitive",
          "params": {"temperature": 0, "response_format": {"type": "json_object"}},
          "assistant": "{\"campaign\": \"summer\", \"budget\": 12000, \"items\": [{\"name\": \"Beach cleanup "
                       "sponsorship\", \"owner\": \"tbd\", \"cost_estimate\": 4000, \"status\": \"idea\"}, "
                       "{\"name\": \"User photo contest\", \"owner\": \"tbd\", \"cost_estimate\": 1500, \"status\": "
                       "\"idea\"}, {\"name\": \"Discount code SUMMER15\", \"owner\": \"tbd\", \"cost_estimate\": "
                       "2500, \"status\": \"idea\"}, {\"name\": \"Cyclist influencer collab\", \"owner\": \"tbd\", "
                       "\"cost_estimate\": 4000, \"status\": \"idea\"}]}"},
         {"user": "make the influencer collab 5000 and give the photo contest to Jonas", "class": "sensitive",
          "params": {"temperature": 0, "response_format": {"type": "json_object"}}},
     ]},
    {"tag": "pivot", "system": "You are a helpful assistant.", "params": {"temperature": 0.9},
     "turns": [
         {"user": "my daughter is learning about volcanoes and now wants one for her birthday lol",
          "class": "tolerant",
          "assistant": "A future volcanologist! A baking-soda volcano cake could be a fun compromise — erupts "
                       "with frosting instead of lava."},
         {"user": "ha, yes! she also asked me how hot lava is and I said 'very'. what's the actual number?",
          "class": "neutral", "params": {"temperature": 0.5},
          "assistant": "Lava is usually between about 700 °C and 1,200 °C, depending on its composition. "
                       "Basaltic lava, like in Hawaii, is on the hot end."},
         {"user": "ok homework time: if lava flows at 2 km/h, how long to reach a village 7.5 km away, and "
                  "what if it slows by 20% after the first 3 km? show the steps for a 10 year old",
          "class": "sensitive", "params": {"temperature": 0}},
     ]},
    {"tag": "pivot", "system": "You are a friendly assistant for a recruiting team.",
     "turns": [
         {"user": "morning! coffee is kicking in, let's do this", "class": "tolerant",
          "params": {"temperature": 0.9},
          "assistant": "Good morning! Coffee-powered recruiting, my favourite kind. What's first on the list?"},
         {"user": "extract the candidate info from this into JSON (name, email, years_experience, skills[]): "
                  "'Tomás Herrera, tomas.h@example.com, 7 yrs backend, Go, Kafka, Postgres, some Rust'",
          "class": "sensitive", "params": {"temperature": 0, "response_format": {"type": "json_object"}},
          "assistant": "{\"name\": \"Tomás Herrera\", \"email\": \"tomas.h@example.com\", \"years_experience\": "
                       "7, \"skills\": [\"Go\", \"Kafka\", \"Postgres\", \"Rust\"]}"},
         {"user": "and this one: 'Aiko Sato — aiko@sato.dev — 3 years, React, TypeScript, GraphQL'",
          "class": "sensitive", "params": {"temperature": 0, "response_format": {"type": "json_object"}},
          "assistant": "{\"name\": \"Aiko Sato\", \"email\": \"aiko@sato.dev\", \"years_experience\": 3, "
                       "\"skills\": [\"React\", \"TypeScript\", \"GraphQL\"]}"},
         {"user": "thanks! write a warm, fun invite to our team lunch for the new hires", "class": "tolerant",
          "params": {"temperature": 1.0},
          "assistant": "Hey new crew! 🎉 Join us Friday at 12:30 for lunch on us — come hungry, bring your best "
                       "'two truths and a lie', and meet the people behind the Slack avatars."},
         {"user": "perfect, thanks!", "class": "tolerant", "params": {"temperature": 0.8}},
     ]},
    {"tag": "pivot", "system": "You are a chatty assistant for a fitness app.", "params": {"temperature": 1.0},
     "turns": [
         {"user": "I ran 8k today!! new record", "class": "tolerant",
          "assistant": "8k! That's a huge milestone — how did your legs feel at the end?"},
         {"user": "dead lol. my watch says 46:12. what was my average pace per km and per mile? exact please",
          "class": "sensitive", "params": {"temperature": 0}},
     ]},
    {"tag": "pivot", "system": "You are a helpful assistant for a landlord managing a few flats.",
     "turns": [
         {"user": "my tenant left me a lovely thank-you card and homemade jam, so sweet", "class": "tolerant",
          "params": {"temperature": 0.9},
          "assistant": "That's lovely! Tenants like that are worth their weight in jam. Maybe a little note back?"},
         {"user": "yes later. first: rent 950/month, it goes up by the CPI, which was 3.4%, but the lease caps "
                  "increases at 3%. new rent? then over 12 months how much more do I get? step by step",
          "class": "sensitive", "params": {"temperature": 0},
          "assistant": "The cap applies: the increase is 3%, not 3.4%. New rent = 950 × 1.03 = 978.50. Extra "
                       "per month = 28.50; over 12 months = 342.00."},
         {"user": "great. now a short cute thank-you note for the jam", "class": "tolerant",
          "params": {"temperature": 1.0}},
     ]},
    {"tag": "sensitive", "system": "You are a senior backend engineer helping debug production issues.",
     "params": {"temperature": 0},
     "turns": [
         {"user": "Our Celery workers are OOM-killed every few hours. Tasks load a CSV with pandas, transform it "
                  "and write to Postgres. Where would you start?", "class": "sensitive",
          "assistant": "Check whether memory grows per task or per worker lifetime. Set worker_max_tasks_per_child "
                       "to confirm a leak, read the CSV in chunks with chunksize, and write with "
                       "to_sql(..., chunksize=...) or COPY. Also check prefetch_multiplier: with long tasks, "
                       "prefetching holds extra payloads in memory."},
         {"user": "Memory grows per task. Here's the core: `df = pd.read_csv(url); df = df.merge(lookup, "
                  "on='sku'); df.to_sql('items', engine, if_exists='append')`. Rewrite it to stream in chunks.",
          "class": "sensitive",
          "assistant": "def load(url, lookup, engine, chunk=50_000):\n    for part in pd.read_csv(url, "
                       "chunksize=chunk):\n        part = part.merge(lookup, on='sku', how='left')\n        "
                       "part.to_sql('items', engine, if_exists='append', index=False, method='multi', "
                       "chunksize=5_000)\n        del part"},
         {"user": "Good. Now add a retry with exponential backoff around to_sql for OperationalError, max 5 "
                  "attempts.", "class": "sensitive"},
     ]},
    {"tag": "sensitive", "system": "You write PostgreSQL for analysts. Schema: sessions(id, user_id, started_at, "
                                   "ended_at, device), purchases(id, user_id, amount_cents, created_at).",
     "params": {"temperature": 0},
     "turns": [
         {"user": "Average session length by device for last week.", "class": "sensitive",
          "assistant": "SELECT device, AVG(ended_at - started_at) AS avg_length\nFROM sessions\nWHERE started_at "
                       ">= date_trunc('week', now()) - interval '1 week'\n  AND started_at < date_trunc('week', "
                       "now())\nGROUP BY device;"},
         {"user": "Now only for users who made a purchase the same day as the session.", "class": "sensitive",
          "assistant": "SELECT s.device, AVG(s.ended_at - s.started_at) AS avg_length\nFROM sessions s\nWHERE "
                       "s.started_at >= date_trunc('week', now()) - interval '1 week'\n  AND s.started_at < "
                       "date_trunc('week', now())\n  AND EXISTS (SELECT 1 FROM purchases p WHERE p.user_id = "
                       "s.user_id AND p.created_at::date = s.started_at::date)\nGROUP BY s.device;"},
         {"user": "Express the length in minutes, rounded to one decimal.", "class": "sensitive"},
     ]},
    {"tag": "sensitive", "system": "You are a math tutor. Work step by step.", "params": {"temperature": 0.2},
     "turns": [
         {"user": "Solve: 2^(x+1) = 48", "class": "sensitive",
          "assistant": "2^(x+1) = 48 → x + 1 = log2(48) = log2(16 · 3) = 4 + log2(3) ≈ 4 + 1.585 = 5.585, so "
                       "x ≈ 4.585."},
         {"user": "Why can you split log2(16·3) like that?", "class": "sensitive",
          "assistant": "Because log(ab) = log(a) + log(b) for any base: logarithms turn multiplication into "
                       "addition. log2(16) = 4 since 2^4 = 16."},
         {"user": "Give me two similar problems and their solutions.", "class": "sensitive"},
     ]},
    {"tag": "neutral", "system": "You are the support assistant for Parcelo, a parcel delivery service. Be "
                                 "friendly and concise.",
     "turns": [
         {"user": "Hi, my parcel was supposed to arrive yesterday.", "class": "neutral",
          "assistant": "Sorry about the delay! Could you share your tracking number so I can check where it is?"},
         {"user": "PX-330918", "class": "neutral",
          "assistant": "Thanks. It's at the local depot and scheduled for delivery tomorrow between 9:00 and "
                       "13:00. Would you like to redirect it to a pickup point instead?"},
         {"user": "Yes, the one at the train station please.", "class": "neutral"},
     ]},
    {"tag": "neutral", "system": "You are a helpful cooking assistant.",
     "turns": [
         {"user": "What can I cook with chickpeas, spinach and a tin of tomatoes?", "class": "neutral",
          "assistant": "A quick chickpea and spinach stew: fry onion and garlic, add cumin and paprika, then the "
                       "tomatoes and chickpeas; simmer 15 minutes and stir in the spinach at the end."},
         {"user": "I don't have cumin", "class": "neutral",
          "assistant": "No problem — use a bit of curry powder, or smoked paprika plus a pinch of chilli."},
         {"user": "how long does it keep in the fridge?", "class": "neutral"},
     ]},
    {"tag": "tolerant", "system": "You are Pip, a cheerful companion chatbot. Keep replies short and warm.",
     "params": {"temperature": 0.9},
     "turns": [
         {"user": "heyyy I'm back", "class": "tolerant",
          "assistant": "Welcome back! 😊 How did the rest of your day go?"},
         {"user": "not bad, made lasagna for the first time", "class": "tolerant",
          "assistant": "First lasagna — impressive! Did it hold together, or was it a delicious landslide?"},
         {"user": "landslide but tasty", "class": "tolerant",
          "assistant": "The best kind! Structural integrity is overrated when it tastes good."},
         {"user": "haha true. ok gotta sleep, night!", "class": "tolerant"},
     ]},
    {"tag": "tolerant", "system": "You are a whimsical creative-writing partner.", "params": {"temperature": 1.1},
     "turns": [
         {"user": "let's write a story together. a fox opens a bakery in a human village", "class": "tolerant",
          "assistant": "Marigold the fox hung a hand-painted sign over the door: FRESH BREAD, NO QUESTIONS. The "
                       "villagers had questions anyway — mostly about the tail dusted with flour."},
         {"user": "the baker next door is jealous and tries to sabotage her", "class": "tolerant",
          "assistant": "Old Bertram swapped her sugar for salt one night. By morning, Marigold's salted caramel "
                       "buns had a queue around the square, and Bertram was in it, hat pulled low."},
         {"user": "lol. now a twist ending", "class": "tolerant"},
     ]},
    {"tag": "tolerant", "system": "You are Nova, a witty chat buddy. Use light humour, never be mean.",
     "params": {"temperature": 1.0},
     "turns": [
         {"user": "I'm trying to get into birdwatching", "class": "tolerant",
          "assistant": "Excellent hobby — it's basically people-watching, but everyone has feathers and better "
                       "outfits. Seen anything good yet?"},
         {"user": "a heron! it just stood there for 20 minutes", "class": "tolerant",
          "assistant": "Herons are the masters of dramatic patience. Twenty minutes of standing is a warm-up for "
                       "them."},
         {"user": "give it a name and a backstory", "class": "tolerant",
          "assistant": "Meet Gerald: retired opera singer, now devotes his life to the perfect fish. He has "
                       "never sung since, out of respect for the pond."},
         {"user": "poor Gerald. write him a tiny poem", "class": "tolerant",
          "assistant": "Gerald stands in silver reeds, / a statue made of waiting; / the river hums his old "
                       "arias, / the fish are hesitating."},
         {"user": "love it 😂", "class": "tolerant"},
     ]},
    {"tag": "tolerant", "system": "You are a chatty assistant for a travel community app. Keep answers short and "
                                  "fun.", "params": {"temperature": 0.9},
     "turns": [
         {"user": "just landed in Tokyo!!", "class": "tolerant",
          "assistant": "Welcome to Tokyo! 🎌 First mission: a convenience-store egg sandwich. Trust me."},
         {"user": "haha on it. what's something fun to do tonight, I'm jet-lagged", "class": "tolerant",
          "assistant": "Jet-lag special: wander Shibuya's lights, then a slow soak at a sento. Early night, huge "
                       "morning."},
         {"user": "sento sounds perfect, thanks!", "class": "tolerant"},
     ]},
    {"tag": "tolerant", "system": "You are the in-game companion of a cozy farming game. Stay playful.",
     "params": {"temperature": 1.0},
     "turns": [
         {"user": "my turnips are finally ready!", "class": "tolerant",
          "assistant": "Turnip time! 🌱 The market cat says prices are high today. Sell, or hoard for glory?"},
         {"user": "hoard obviously", "class": "tolerant"},
     ]},
    {"tag": "tolerant", "system": "You are a supportive, upbeat assistant in a wellbeing app. Keep it light; you "
                                  "are not a therapist.", "params": {"temperature": 0.8},
     "turns": [
         {"user": "long day. just want to vent a little", "class": "tolerant",
          "assistant": "I'm here — vent away. What made today so long?"},
         {"user": "back-to-back meetings and then the bus broke down", "class": "tolerant",
          "assistant": "Oof, a double whammy. You made it through though. Anything small you can do for "
                       "yourself tonight?"},
         {"user": "maybe a bath and a silly movie", "class": "tolerant",
          "assistant": "That sounds like exactly the right prescription. Any movie in mind?"},
         {"user": "suggest something ridiculous", "class": "tolerant"},
     ]},
]
