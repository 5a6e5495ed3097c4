"""Hand-written labelled requests, everyday work: int8 and int4 (rubric in data/requests/README.md)."""

from labelled_common import add, chat, comp

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
add("i18n", "int8", "Chinese short assistant request.",
    chat("帮我写一条请假的微信消息，明天上午有事。", max_tokens=100))

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

