"""Hand-written long documents (1,000-3,000 characters) and the tasks asked of them, for the traffic mixes.
Classes are judgement (rubric in data/requests/README.md). Used by scripts/build_traffic_mixes.py."""

from __future__ import annotations

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
