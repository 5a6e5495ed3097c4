"""Hand-written parts of the traffic mixes: one-liners, long documents, and multi-turn sessions.

Classes are judgement (rubric in data/requests/README.md): sensitive ~ fp16/fp8, neutral ~ int8, tolerant ~ int4.
Used by scripts/build_traffic_mixes.py.
"""

from __future__ import annotations

# --- tolerant: conversational products -------------------------------------------------------------------
CHAT_SYSTEMS = [
    "You are Pip, a cheerful companion chatbot. Keep replies short and warm.",
    "You are the friendly assistant inside a messaging app. Be casual and brief.",
    "You are Nova, a witty chat buddy. Use light humour, never be mean.",
    "You are a supportive, upbeat assistant in a wellbeing app. Keep it light; you are not a therapist.",
    "You are the in-game companion of a cozy farming game. Stay playful.",
    "You are a chatty assistant for a travel community app. Keep answers short and fun.",
]

CHAT_LINES = [
    "hey, what's up?",
    "I just made the best pancakes of my life 🥞",
    "ugh, Mondays. talk me into getting out of bed",
    "do you think cats dream?",
    "my plant is dying and I feel personally attacked",
    "what should I name my new sourdough starter?",
    "tell me something random and cool",
    "I can't decide between pizza and sushi tonight, help",
    "rate my weekend plan: sleep, snacks, more sleep",
    "is it weird that I talk to my dog in a British accent?",
    "just finished a 5k run!! first one ever",
    "give me a pep talk, I have a dentist appointment",
    "what's your favourite season and why",
    "I'm making tea, want some? ☕",
    "lol I just waved back at someone who wasn't waving at me",
    "say something to cheer me up, it's raining again",
    "bet you can't guess my favourite colour",
    "I finally cleaned my inbox. inbox zero baby",
    "my flatmate ate my leftovers again 😤",
    "what's a fun fact about octopuses?",
    "I'm bored, let's play 20 questions. I'm thinking of an animal.",
    "good morning sunshine",
    "how was your day? mine was chaotic",
    "I just adopted a hamster named Sir Nibbles",
    "what would you do with a free afternoon in Lisbon?",
    "tell me a joke about programmers",
    "honestly, is cereal a soup?",
    "I need a silly nickname for my sister",
    "I'm watching the sunset right now, it's gorgeous",
    "what's the best snack for a movie night?",
    "remind me why I thought a 6am flight was a good idea",
    "my code finally compiled and I'm celebrating with cake",
    "say hi to my friend Lena, she doesn't believe you're real",
    "any tips for staying awake in a boring meeting? asking for a friend",
    "I just learned to juggle 3 balls!",
    "ok tell me your hottest take on breakfast foods",
    "I want to start a book club, what should we call it?",
    "do you like puns? I've got a great one about bread",
    "feeling a bit lonely tonight, just wanted to chat",
    "let's make up a new holiday. what do we celebrate?",
    "what's the most relaxing sound in the world?",
    "my kid asked why the sky is blue and I panicked",
    "rain or snow, pick one",
    "I'm on a train with no wifi, entertain me for a minute",
    "just got back from the beach, sunburnt but happy",
    "what's a good emoji combo for 'I'm tired but proud'",
    "would a penguin make a good roommate?",
    "tell me a two-sentence spooky story",
    "I can't sleep. say something calming",
    "guess what, I got the job!!!",
    "my grandma just learned to send voice messages, it's chaos",
    "what song should I put on while cleaning?",
    "we're naming our wifi network, need something funny",
    "is it too early for Christmas music? it's October",
    "I tried knitting and made a very sad scarf",
    "if you were a sandwich what would you be",
    "help me pick a karaoke song, I can't sing at all",
    "my team won the pub quiz!",
    "what's something nice I could do for a neighbour?",
    "talk like a cowboy for a bit",
    "the cat is sitting on my keyboard, what do I do",
    "tell me a riddle",
    "i'm procrastinating, distract me properly",
    "plan me a perfect lazy Sunday in three steps",
    "what's the cutest animal and why is it the capybara",
    "made it through the week! what's a good way to celebrate cheaply?",
    "quick, a compliment for my code reviewer",
    "I think my houseplants are plotting against me",
    "should I get bangs? be honest but kind",
    "my coffee order is a small oat latte, judge me",
]

CREATIVE_SYSTEMS = [
    "You are a whimsical creative-writing partner.",
    "You are a copywriter who loves playful language.",
    "You are a poet. Favour vivid images over rhyme.",
    "You write short, punchy marketing copy for small businesses.",
]

CREATIVE_LINES = [
    "Write a short poem about a bicycle that wants to fly.",
    "A limerick about a forgetful wizard.",
    "Give me 6 names for a coffee truck that parks near a university.",
    "Write a 100-word story where the moon gets a job.",
    "Three slogans for a dog-walking service called Pawsitive Strides.",
    "A haiku about the last slice of pizza.",
    "Write a tiny fairy tale about a shy cloud.",
    "Invent a cocktail name and a one-line description for a summer menu.",
    "Write a funny out-of-office message for someone on a fishing trip.",
    "Describe a dragon's breakfast in the style of a food critic.",
    "A short toast for my parents' 35th anniversary, sweet and funny.",
    "Write the opening paragraph of a mystery set in a greenhouse.",
    "Brainstorm 10 quirky names for a bookshop cat.",
    "Write a love letter from a sock to its lost twin.",
    "Song verse about a road trip through the desert at night.",
    "A motivational quote a sleepy sloth would say.",
    "Five taglines for a board-game café.",
    "Write a villain monologue for a very polite evil librarian.",
    "Describe autumn to someone who has never seen trees.",
    "Make up a legend about why foxes have white-tipped tails.",
    "Write a 4-line poem for a wedding card, no clichés.",
    "Tweet-length announcement for our bakery's new sourdough, playful tone.",
    "Ideas for a costume party theme for 20-somethings.",
    "Write a short bedtime story about a robot who is afraid of the dark.",
    "Pitch me a sitcom about three roommates who are all ghosts.",
    "A rhyming couplet for a fridge magnet about leftovers.",
    "Write a cheeky product description for a very heavy umbrella.",
    "Give me some plot twists for a heist story set on a cruise ship.",
    "A short free-verse poem about commuting in the rain.",
    "Ten fun names for a five-a-side football team.",
    "Write a postcard from a snail on holiday.",
    "Describe the sound of a city waking up, poetically, in 80 words.",
    "Invent three new ice-cream flavours with names.",
    "Write a dramatic weather forecast narrated by a pirate.",
    "A short speech for a cat accepting a lifetime achievement award.",
    "Catchy names for a podcast about houseplants.",
    "Write a haiku sequence (3) about a night bus.",
    "Give me a fun caption for a photo of my dog in a raincoat.",
    "Write a kids' poem about counting stars.",
    "Slogan ideas for a repair café that fixes toasters and bikes.",
]

# --- neutral: ordinary assistant work (system prompt, user message) --------------------------------------
NEUTRAL_LINES = [
    ("You are a helpful assistant.", "How long should I let a steak rest after cooking?"),
    ("You are a helpful assistant.", "What's the difference between weather and climate?"),
    ("You are a helpful assistant.", "How do I unclog a bathroom sink without chemicals?"),
    ("You are a helpful assistant.", "Why do my ears pop on airplanes?"),
    ("You are a helpful assistant.", "What should I pack for a 3-day hiking trip in spring?"),
    ("You are the help centre assistant for Streamly, a video streaming service.",
     "How do I download episodes to watch offline?"),
    ("You are the help centre assistant for Streamly, a video streaming service.",
     "Can I share my account with my partner who lives elsewhere?"),
    ("You are the support assistant for Parcelo, a parcel delivery service.",
     "What does 'held at depot' mean on my tracking page?"),
    ("You are the support assistant for Parcelo, a parcel delivery service.",
     "Can someone else sign for my parcel if I'm not home?"),
    ("You are the support assistant for a bank's mobile app. Never ask for full card numbers or PINs.",
     "How do I freeze my card if I think I lost it?"),
    ("You are the support assistant for a bank's mobile app. Never ask for full card numbers or PINs.",
     "Why is a payment showing as pending for three days?"),
    ("You summarise text for busy readers.",
     "Summarise: The library will close at 5pm on Fridays from next month due to staff shortages. Weekend hours "
     "are unchanged. The council is recruiting and hopes to restore hours by spring."),
    ("You summarise text for busy readers.",
     "Summarise in one line: Our Q2 NPS rose from 31 to 38, driven by faster support replies; complaints about "
     "pricing stayed flat."),
    ("You are an HR assistant. Answer from general best practice; suggest asking HR for company specifics.",
     "How should I ask my manager for a day off for a family event?"),
    ("You are a helpful assistant.", "Explain what a credit score is, briefly."),
    ("You are a helpful assistant.", "What are some good stretches after sitting all day?"),
    ("You are a cooking assistant.", "What can I substitute for buttermilk in pancakes?"),
    ("You are a cooking assistant.", "How do I keep basil fresh for longer?"),
    ("You are a travel assistant.", "Do I need a visa to visit Japan as an EU citizen for two weeks?"),
    ("You are a travel assistant.", "What's the best way to get from Rome Fiumicino to the city centre?"),
    ("Classify the message intent as one of: order_status, refund, complaint, other. Answer with the label.",
     "I still haven't received my order from last Tuesday."),
    ("Classify the message intent as one of: order_status, refund, complaint, other. Answer with the label.",
     "The headphones stopped working after two days, I want my money back."),
    ("Eres un asistente útil. Responde en español.", "¿Cuál es la mejor época para visitar Patagonia?"),
    ("Du bist ein hilfreicher Assistent. Antworte auf Deutsch.", "Was muss ich beim Ummelden meines Autos beachten?"),
    ("Tu es un assistant serviable. Réponds en français.", "Comment conserver du pain frais plus longtemps ?"),
]

# --- sensitive: precise work (system prompt, user message, temperature) ---------------------------------
SQL_SCHEMA = ("You write PostgreSQL. Tables: users(id, email, created_at, plan), events(id, user_id, name, "
              "created_at, properties jsonb), invoices(id, user_id, amount_cents, paid_at).")
SENSITIVE_LINES = [
    (SQL_SCHEMA, "Daily active users for the last 30 days.", 0),
    (SQL_SCHEMA, "Users who signed up in March and never paid an invoice.", 0),
    (SQL_SCHEMA, "Median days from signup to first paid invoice, by plan.", 0),
    (SQL_SCHEMA, "The 5 most common event names per plan last week.", 0.1),
    ("You are a senior Python engineer. Code only.",
     "Function that parses durations like '1h30m', '45s', '2d' into seconds; raise ValueError on junk.", 0),
    ("You are a senior Python engineer. Code only.",
     "Write an async function that fetches 20 URLs with httpx with at most 5 in flight at once.", 0),
    ("You are a senior Python engineer. Code only.",
     "Pydantic v2 model for an address with a validator that normalises postcode to upper case.", 0.2),
    ("You are a senior Python engineer. Code only.",
     "Write a thread-safe token-bucket rate limiter class with acquire(timeout).", 0),
    ("You are a JavaScript expert.", "Write a function that deep-merges two plain objects without mutating them.", 0),
    ("You are a JavaScript expert.", "Convert this callback-style function to async/await: "
     "`fs.readFile(p, 'utf8', (err, data) => { if (err) return cb(err); cb(null, JSON.parse(data)); })`", 0),
    ("Return only valid JSON.", "Extract {name, date, amount} from: 'Paid Ahmed 120 EUR on 4 March for the "
     "plumbing job.'", 0),
    ("Return only valid JSON.", "Turn this address into {street, number, postcode, city, country}: "
     "'Keizersgracht 123, 1015 CJ Amsterdam, Netherlands'", 0),
    ("Return only valid JSON.", "List the people and their roles as [{person, role}]: 'Maya chairs the "
     "committee; Leon is treasurer; Ines takes minutes.'", 0),
    ("Solve step by step, then give the final answer.",
     "A tank fills in 6 hours with pipe A and 9 hours with pipe B. How long with both open?", 0),
    ("Solve step by step, then give the final answer.",
     "What is the sum of all multiples of 3 or 5 below 1000?", 0),
    ("Solve step by step, then give the final answer.",
     "A shirt costs 20% more than a hat. Together they cost 77. What does the hat cost?", 0),
    ("Solve step by step, then give the final answer.",
     "How many ways can 5 people sit around a round table?", 0.2),
    ("You are a DevOps engineer.", "Write a GitHub Actions workflow that runs pytest on Python 3.11 and 3.12 "
     "and caches pip.", 0),
    ("You are a DevOps engineer.", "nginx config to proxy /api to localhost:8000 and serve /static from "
     "/srv/static with caching headers.", 0),
    ("You are a data engineer.", "Write a pandas snippet that pivots a long table (date, metric, value) to wide "
     "and fills missing days with 0.", 0.2),
    ("You are a legal translator. Translate precisely.",
     "Translate into Spanish: 'The warranty does not cover damage caused by misuse or unauthorised repair.'", 0),
    ("You are a legal translator. Translate precisely.",
     "Translate into German: 'Payment is due within thirty days of the invoice date.'", 0.1),
    ("You are a regex expert.", "Regex that matches ISO 8601 dates (YYYY-MM-DD) with valid months and days "
     "1-31, plus tests.", 0),
    ("You are a senior Go engineer.", "Write a Go HTTP middleware that adds a request id header if missing and "
     "logs method, path, status and duration.", 0),
    ("You are a careful analyst. Think step by step.",
     "If revenue grew 12% in year one and shrank 5% in year two, what is the total change over two years?", 0.3),
]

# --- long documents (for prompts of 1,000-3,000 characters) ----------------------------------------------
DOCUMENTS = {
    "faq": (
        "Brightdesk Help Centre — Plans and billing\n\n"
        "Which plans do you offer? Starter (free, up to 2 users, 3 boards), Plus (8 EUR per user per month, "
        "unlimited boards, file uploads up to 250 MB), and Business (16 EUR per user per month, adds SSO, audit "
        "log, guest access controls and priority support).\n\n"
        "How does billing work? Plans are billed monthly or yearly in advance. Yearly billing gets two months free. "
        "Adding a user mid-cycle is charged pro rata on the next invoice; removing a user creates a credit, not a "
        "refund.\n\n"
        "Can I get a refund? Yearly plans can be refunded in full within 14 days of purchase. After that we do not "
        "refund unused time, but you can downgrade at the end of the term.\n\n"
        "Which payment methods are accepted? Credit and debit cards (Visa, Mastercard, Amex), SEPA direct debit "
        "for EU customers, and bank transfer for Business plans with 20 or more users.\n\n"
        "What happens if a payment fails? We retry three times over seven days and email the billing contact each "
        "time. After the third failure the workspace becomes read-only until payment succeeds; no data is "
        "deleted.\n\n"
        "Do you offer discounts? Registered non-profits and schools get 50% off Plus and Business. Startups in "
        "partner accelerators get six months of Plus free.\n\n"
        "How do I change the billing contact? Workspace owners can change it under Settings → Billing → Contacts."
    ),
    "postmortem": (
        "Postmortem: checkout outage, 14 May\n\n"
        "Summary: For 47 minutes (13:12-13:59 UTC) about 38% of checkout attempts failed with HTTP 502. Roughly "
        "4,100 orders were affected; most customers retried successfully within the hour.\n\n"
        "Timeline: 12:55 a config change raised the payment service's connection pool from 50 to 200 per "
        "instance. 13:12 error rate alerts fired. 13:20 on-call suspected the new release of the cart service and "
        "rolled it back; errors continued. 13:41 a database engineer noticed the payments database at its "
        "max_connections limit (800) with 4 instances x 200 connections. 13:52 the pool change was reverted. 13:59 "
        "error rate back to baseline.\n\n"
        "Root cause: the pool size change was reviewed as a safe performance tweak; nobody checked it against "
        "the database's connection limit. New connections were refused, and the payment service returned 502 "
        "instead of queueing.\n\n"
        "What went well: alerting fired within two minutes; customer support had a status banner up by 13:25.\n\n"
        "What went badly: the cart rollback cost 20 minutes; the config change was not linked in the deploy log, "
        "so it was not an obvious suspect.\n\n"
        "Action items: add a CI check comparing total pool size to max_connections (owner: Dana, due 31 May); "
        "show config changes in the deploy log (owner: Malik, due 7 June); make the payment service shed load "
        "with 503 and Retry-After instead of 502 (owner: Sofia, due 21 June); run a game day on connection "
        "exhaustion (owner: Dana, due 30 June)."
    ),
    "module": (
        "```python\nimport json, os, time\n\n"
        "CACHE = {}\n\n"
        "def load_user(uid):\n"
        "    if uid in CACHE and time.time() - CACHE[uid][1] < 300:\n"
        "        return CACHE[uid][0]\n"
        "    path = os.path.join('/data/users', str(uid) + '.json')\n"
        "    if not os.path.exists(path):\n"
        "        return None\n"
        "    f = open(path)\n"
        "    u = json.load(f)\n"
        "    CACHE[uid] = (u, time.time())\n"
        "    return u\n\n"
        "def save_user(u):\n"
        "    path = os.path.join('/data/users', str(u['id']) + '.json')\n"
        "    f = open(path, 'w')\n"
        "    json.dump(u, f)\n"
        "    CACHE[u['id']] = (u, time.time())\n\n"
        "def rename_user(uid, name):\n"
        "    u = load_user(uid)\n"
        "    if u == None:\n"
        "        raise Exception('no user')\n"
        "    u['name'] = name\n"
        "    save_user(u)\n"
        "    return u\n\n"
        "def users_with_plan(plan):\n"
        "    out = []\n"
        "    for fn in os.listdir('/data/users'):\n"
        "        u = load_user(int(fn.split('.')[0]))\n"
        "        if u['plan'] == plan:\n"
        "            out.append(u)\n"
        "    return out\n```"
    ),
    "thread": (
        "From: Olivia Brandt\nSubject: Re: Re: onboarding delays\n\n"
        "Hi Sam, thanks for the call yesterday. To recap from our side: we signed in January expecting to be live "
        "by the end of February. It is now mid-April. The data import has failed twice, each time with a vague "
        "'validation error', and it took your team five days to reply to the second ticket. Our operations lead "
        "has had to keep running the old system in parallel, which costs us real money.\n\n"
        "I want to be fair: your onboarding specialist, Priya, has been great whenever we get her time, and the "
        "product itself is what we need. But we need a firm plan. Specifically: (1) a named engineer on the import "
        "issue, (2) a go-live date you are confident in, and (3) some recognition of the extra months we have "
        "paid for without using the product.\n\n"
        "If we can't agree on this by the end of next week, I'll have to raise it with our procurement team, who "
        "will ask about exit options.\n\nBest,\nOlivia\n\n"
        "> From: Sam Ortiz\n> Thanks Olivia, I understand the frustration and I'm escalating internally. I'll "
        "come back to you with a plan."
    ),
    "draft_story": (
        "The ferry to Inishmore ran twice a day in summer and once in winter, and Nora had missed both. She stood "
        "on the pier with her grandmother's tin box under one arm and watched the grey water fold itself over "
        "and over, as if it were trying to tidy something that would not stay tidy.\n\n"
        "A man in a yellow oilskin was mending a lobster pot at the end of the slipway. He looked at her, then at "
        "the box, then at the sky.\n\n"
        "'You'll be the granddaughter,' he said. It was not a question.\n\n"
        "'How did you know?'\n\n"
        "'She said you'd come with the box. She said you'd miss the boat, too.' He stood, wiped his hands on his "
        "trousers, and nodded at a small blue currach pulled up on the stones. 'She also said I was to take you "
        "across if you did. Though she didn't say what for.'\n\n"
        "Nora looked down at the box. She had not opened it. The key was on a string around her neck, where her "
        "grandmother had put it the last time they saw each other, saying only: not until you're on the island."
    ),
    "transcript": (
        "Weekly product sync — transcript (auto-generated)\n\n"
        "Lena: OK, let's start. Three things today: the search relaunch, the pricing page test, and hiring.\n"
        "Tariq: Search first. The new index is live for 10% of users. Click-through on the first result is up from "
        "41 to 47 percent. Zero-result searches dropped by about a third.\n"
        "Lena: Nice. Any complaints?\n"
        "Tariq: Two things. Exact product codes rank worse than before, and a few people miss the old filters.\n"
        "Ama: The product-code issue is the tokenizer. We can add an exact-match boost, maybe two days of work.\n"
        "Lena: Do it before we go to 50 percent. Pricing page?\n"
        "Ama: Variant B, the one with annual pricing shown first, has a 9 percent higher trial start rate, but "
        "it's only been a week and the sample is small. I'd run it another two weeks.\n"
        "Lena: Agreed. Hiring?\n"
        "Tariq: We have two final-round candidates for the backend role. Interviews Thursday and Friday.\n"
        "Lena: Great. I'll join Friday's. Anything else? No? Then: Ama does the exact-match boost, we extend the "
        "pricing test to the 28th, and Tariq sends me the candidate packets by Wednesday. Thanks all."
    ),

    "prd": (
        "PRD: Shared shopping lists (v0.3, draft)\n\n"
        "Problem. 41% of our active users say in surveys that they shop for a household, but lists are "
        "single-user. People work around it by screenshotting lists into group chats, which go stale within "
        "minutes. Support receives about 60 tickets a month asking for sharing.\n\n"
        "Goals. (1) Let a list owner invite up to 10 people by link or email. (2) Show edits from others within "
        "2 seconds when online. (3) Work offline and merge changes when back online without losing items. "
        "(4) Keep the free tier useful: sharing is free for up to 2 collaborators; more needs Premium.\n\n"
        "Non-goals. Real-time cursors or typing indicators; shared budgets; chat inside lists; web app support "
        "in the first release (mobile only).\n\n"
        "Users and stories. As a parent, I add 'milk' at home and my partner sees it at the shop. As a "
        "flatmate, I tick off 'bin bags' and nobody buys them twice. As an owner, I remove someone who moved out "
        "and they lose access immediately. As an invitee without an account, I can open the link, see the list "
        "read-only, and am asked to sign up to edit.\n\n"
        "Requirements. Items have text, quantity, checked state, who added them and when. Conflicts: last "
        "writer wins per field, except deletion, which wins over edits made while offline; deleted items go to "
        "a 'recently removed' section for 7 days. Notifications: a daily digest by default; instant push only "
        "when an item is added to a list the user has opened in the last hour. Permissions: owner, editor, "
        "viewer. Only the owner can delete the list or change roles.\n\n"
        "Metrics. Primary: weekly active lists with 2+ collaborators. Secondary: screenshot shares from the "
        "list screen (should fall), Premium conversions attributed to the collaborator limit, and support "
        "tickets about sharing (target: under 10 a month). Guardrail: crash-free sessions stay above 99.6%.\n\n"
        "Risks. Sync bugs that lose items would destroy trust; we will dogfood internally for three weeks. "
        "Abuse: invite links could be posted publicly, so links expire after 7 days and owners can revoke them. "
        "Privacy: invitees see the display names of other members but never their emails.\n\n"
        "Open questions. Should viewers be able to tick items? Do we need a limit on items per list? What "
        "happens to a shared list when the owner deletes their account — transfer to the oldest editor, or "
        "delete?\n\n"
        "Timeline. Design review 3 June; beta to 5% of Android users 1 July; iOS beta 15 July; GA mid-August."
    ),
    "reviews": (
        "Customer reviews, Aeropress-style coffee maker 'Brewlet', last 30 days\n\n"
        "★★★★★ 'Makes a cleaner cup than my French press and it takes 2 minutes. Rinsing it is a dream.' — Kai\n"
        "★★☆☆☆ 'The plastic started to smell after a month of daily use. Coffee is fine, but I expected "
        "better for 39 euros.' — Marianne\n"
        "★★★★☆ 'Great for camping. Lost a star because the filter cap is fiddly with cold hands.' — Jo\n"
        "★★★★★ 'Bought a second one for the office. Colleagues keep borrowing it.' — Amir\n"
        "★☆☆☆☆ 'Arrived with a cracked chamber. Support replied after 9 days and asked me to pay return "
        "shipping. Not acceptable.' — Fiona\n"
        "★★★★☆ 'Lovely coffee, but the included paper filters ran out quickly and refills are hard to find in "
        "shops.' — Diego\n"
        "★★★☆☆ 'Does what it says. The instructions are confusing — the inverted method is shown but never "
        "explained.' — Lukas\n"
        "★★★★★ 'Honestly the best thing I bought this year. My espresso machine is gathering dust.' — Sunita\n"
        "★★☆☆☆ 'Plunger seal leaks a bit if you press too hard. Coffee ends up on the counter.' — Ben\n"
        "★★★★☆ 'Compact, light, tastes great. Would love a metal filter option.' — Chloé\n"
        "★★★★★ 'Gift for my dad; he now lectures everyone about bloom time.' — Hannah\n"
        "★★★☆☆ 'Fine for one cup, useless for two people. Wish there was a bigger version.' — Pieter\n"
        "★★★★☆ 'Excellent, but the cardboard packaging was huge for such a small product.' — Rosa\n"
        "★☆☆☆☆ 'Stopped sealing after 3 weeks, replacement seal costs 12 euros. Feels like a trap.' — Olek\n"
        "★★★★★ 'Easy to clean, unbreakable so far (I dropped it twice), and the coffee is smooth.' — Grace\n"
        "★★★★☆ 'Good value. The stirring paddle is too short for the chamber though.' — Tomasz\n"
        "★★★★★ 'Fast delivery, works perfectly, and the brew guide QR code is a nice touch.' — Ines"
    ),
}

# (system prompt, user template with {doc}, document, class, params)
DOCUMENT_TASKS = [
    ("Answer using only the help-centre text. Say so if it is not covered.",
     "{doc}\n\nQuestion: We pay yearly and bought 3 weeks ago. Can we get a refund?", "faq", "neutral", {}),
    ("Answer using only the help-centre text. Say so if it is not covered.",
     "{doc}\n\nQuestion: what happens to our data if the card payment fails?", "faq", "neutral",
     {"temperature": 0.3}),
    ("Answer using only the help-centre text. Say so if it is not covered.",
     "{doc}\n\nQuestion: do schools get a discount, and on which plans?", "faq", "neutral", {}),
    ("Return only JSON.", "{doc}\n\nList every plan as {{name, price_eur_per_user_month, features}}.", "faq",
     "sensitive", {"temperature": 0, "response_format": {"type": "json_object"}}),
    ("You summarise incident reports for executives.", "Summarise in 4 sentences:\n\n{doc}", "postmortem",
     "neutral", {}),
    ("Extract the action items as JSON: [{{owner, task, due}}]. JSON only.", "{doc}", "postmortem", "sensitive",
     {"temperature": 0, "response_format": {"type": "json_object"}}),
    ("You are a site reliability engineer.",
     "{doc}\n\nWrite the CI check from the first action item as a Python script that reads pool sizes from "
     "services/*.yaml and fails if their sum exceeds max_connections.", "postmortem", "sensitive",
     {"temperature": 0}),
    ("You are a senior Python engineer.",
     "Refactor this module: no module-level cache, use pathlib and context managers, type hints, and a proper "
     "exception. Keep behaviour.\n\n{doc}", "module", "sensitive", {"temperature": 0}),
    ("You are a senior Python engineer.", "Find the bugs in this code and list them:\n\n{doc}", "module",
     "sensitive", {"temperature": 0.2}),
    ("You are a senior Python engineer.", "Write pytest tests for rename_user using tmp_path:\n\n{doc}", "module",
     "sensitive", {"temperature": 0}),
    ("You help account managers write replies to customers. Be honest, specific and calm.",
     "Draft Sam's reply to this email:\n\n{doc}", "thread", "neutral", {}),
    ("You help account managers.", "What does the customer want? Three bullets.\n\n{doc}", "thread", "neutral",
     {"temperature": 0.5}),
    ("You are a whimsical creative-writing partner.", "Continue this story for a few paragraphs:\n\n{doc}",
     "draft_story", "tolerant", {"temperature": 1.0}),
    ("You are a whimsical creative-writing partner.", "Suggest three different things that could be in the "
     "box, each with a one-line hook:\n\n{doc}", "draft_story", "tolerant", {"temperature": 1.1}),
    ("You write meeting notes.", "Summarise this meeting as short notes with decisions:\n\n{doc}", "transcript",
     "neutral", {}),
    ("Return only JSON.", "From this transcript, extract {{decisions: [], action_items: [{{owner, task, due}}]}}:"
     "\n\n{doc}", "transcript", "sensitive", {"temperature": 0, "response_format": {"type": "json_object"}}),
    ("You are a product manager's assistant.", "Summarise this PRD in five bullets for the leadership "
     "review:\n\n{doc}", "prd", "neutral", {}),
    ("You are a senior mobile engineer.", "{doc}\n\nDesign the sync data model and the conflict-resolution "
     "algorithm described here, as Kotlin data classes and a merge function with unit tests.", "prd",
     "sensitive", {"temperature": 0}),
    ("Return only JSON.", "{doc}\n\nExtract {{goals: [], non_goals: [], open_questions: [], milestones: "
     "[{{name, date}}]}}.", "prd", "sensitive", {"temperature": 0, "response_format": {"type": "json_object"}}),
    ("You are a brainstorming partner for a product team.", "{doc}\n\nGive me ten playful names for this "
     "feature.", "prd", "tolerant", {"temperature": 1.1}),
    ("You analyse customer feedback for a product team.", "What are the three most common complaints, and what "
     "do people love?\n\n{doc}", "reviews", "neutral", {}),
    ("You analyse customer feedback for a product team.", "{doc}\n\nCompute the average star rating and the "
     "share of 1-2 star reviews. Show the counting step by step.", "reviews", "sensitive", {"temperature": 0}),
    ("You write replies to product reviews for a small brand. Warm, never defensive.", "{doc}\n\nDraft a reply "
     "to Fiona's review.", "reviews", "neutral", {"temperature": 0.7}),
    ("You are a witty copywriter.", "{doc}\n\nWrite 5 fun social posts quoting the happiest reviewers.",
     "reviews", "tolerant", {"temperature": 1.0}),
]

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
