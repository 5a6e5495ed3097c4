"""Math items: word problems and arithmetic with one numeric answer (graded on the last number)."""

SUFFIX = " Give the final answer as a number on the last line."

# (id, question, answer, wrong answer text, tolerance)
ITEMS = [
    ("math-train-distance", "A train leaves at 09:40 and arrives at 13:10 the same day, averaging 84 km/h. How many kilometres does it travel?", 294, "It travels for 3.5 hours... 84 x 3 = 252\n252", 0),
    ("math-discount-stack", "A jacket costs 120 euros. It is discounted by 25%, and then a further 10% is taken off the discounted price. What is the final price in euros?", 81, "Total discount 35%, so 120 x 0.65 = 78\n78", 0.01),
    ("math-gpu-hours", "A fine-tuning job needs 960 GPU-hours. The cluster gives you 24 GPUs. How many hours of wall-clock time does the job take if it scales perfectly?", 40, "960 / 12 = 80\n80", 0),
    ("math-kv-cache", "Each token of KV cache takes 128 KiB. How many tokens fit in 6 GiB of free memory? (1 GiB = 1024 MiB, 1 MiB = 1024 KiB)", 49152, "6 x 1024 / 128 = 48\n48", 0),
    ("math-compound", "You deposit 2,000 dollars at 5% annual interest compounded yearly. How much is in the account after 3 years, rounded to the cent?", 2315.25, "2000 x 1.15 = 2300\n2300", 0.01),
    ("math-mixture", "How many litres of a 40% saline solution must be mixed with 10 litres of a 10% solution to get a 20% solution?", 5, "10 x (20-10)/(40-10) = 3.33\n3.33", 0.01),
    ("math-primes-below-50", "How many prime numbers are there below 50?", 15, "2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 49\n16", 0),
    ("math-gcd", "What is the greatest common divisor of 462 and 1071?", 21, "Both are divisible by 7, so 7\n7", 0),
    ("math-lcm-buses", "One bus line departs every 12 minutes and another every 18 minutes. Both leave the depot at 08:00. After how many minutes do they next leave together?", 36, "12 x 18 = 216\n216", 0),
    ("math-average-speed", "A cyclist rides 30 km at 15 km/h and then 30 km at 30 km/h. What is the average speed for the whole trip in km/h?", 20, "(15 + 30) / 2 = 22.5\n22.5", 0.01),
    ("math-pipe-fill", "Pipe A fills a tank in 6 hours and pipe B fills it in 3 hours. Running together, how many hours do they take to fill the tank?", 2, "(6 + 3) / 2 = 4.5\n4.5", 0.01),
    ("math-quadratic-root", "What is the larger root of x^2 - 7x + 10 = 0?", 5, "x = 2\n2", 0),
    ("math-derivative-at-point", "Let f(x) = 3x^3 - 4x + 1. What is f'(2)?", 32, "f'(x) = 9x^2 - 4, f'(2) = 9*2 - 4 = 14\n14", 0),
    ("math-integral", "Compute the definite integral of 2x + 3 from x = 1 to x = 4.", 24, "x^2 + 3x evaluated from 1 to 4: 28 - 1 = 27\n27", 0.001),
    ("math-probability-dice", "Two fair six-sided dice are rolled. What is the probability that the sum is 8? Give the answer as a decimal rounded to 4 places.", 0.1389, "There are 6 ways out of 36: 0.1667\n0.1667", 0.0001),
    ("math-combinations", "In how many ways can a committee of 3 be chosen from 10 people?", 120, "10 x 9 x 8 = 720\n720", 0),
    ("math-percent-change", "Monthly active users went from 48,000 to 54,000. What is the percentage increase?", 12.5, "6000 / 54000 = 11.1%\n11.1", 0.01),
    ("math-unit-conversion", "A runner finishes 10 miles. How many kilometres is that, using 1 mile = 1.609344 km? Round to two decimals.", 16.09, "10 / 1.609344 = 6.21\n6.21", 0.005),
    ("math-sequence-sum", "What is the sum of the integers from 1 to 250?", 31375, "250 x 251 = 62750\n62750", 0),
    ("math-geometric-series", "What is 1 + 2 + 4 + 8 + ... + 1024?", 2047, "2^10 = 1024, times 2 = 2048\n2048", 0),
    ("math-ages", "Maria is three times as old as her son. In 12 years she will be twice as old as him. How old is Maria now?", 36, "Son is 12, Maria is 24\n24", 0),
    ("math-hypotenuse", "A right triangle has legs of 9 cm and 12 cm. How long is the hypotenuse in cm?", 15, "9 + 12 = 21\n21", 0),
    ("math-circle-area", "What is the area of a circle with diameter 10 m? Use pi = 3.14159 and round to two decimals.", 78.54, "pi x 10^2 = 314.16\n314.16", 0.01),
    ("math-token-cost", "An API charges $0.50 per million input tokens and $1.50 per million output tokens. A batch uses 8 million input and 2 million output tokens. What does it cost in dollars?", 7, "(8 + 2) x 0.50 = 5\n5", 0.001),
    ("math-throughput", "A server produces 1,800 tokens per second across all requests. How many requests of 450 output tokens can it complete per minute?", 240, "1800 / 450 = 4\n4", 0),
    ("math-modular", "What is the remainder when 7^100 is divided by 5?", 1, "7 mod 5 = 2, so 2^100 mod 5 = 4\n4", 0),
    ("math-median", "What is the median of 14, 3, 9, 22, 7, 18?", 11.5, "Middle value of the list as written is 9\n9", 0.001),
    ("math-fraction", "Simplify 3/4 + 5/6 - 1/3 and give the result as a decimal rounded to 4 places.", 1.25, "3/4 + 5/6 = 8/10, minus 1/3 = 0.4667\n0.4667", 0.0001),
]


def items() -> list[dict]:
    out = []
    for item_id, question, answer, wrong, tol in ITEMS:
        num = f"{answer:,}" if isinstance(answer, int) else f"{answer}"
        out.append({
            "id": item_id, "category": "math",
            "messages": [{"role": "system", "content": "You are a careful assistant. Show brief working."},
                         {"role": "user", "content": question + SUFFIX}],
            "temperature": 0.0, "max_tokens": 384,
            "grader": {"type": "numeric", "expected": answer, "tolerance": tol if tol else 1e-6},
            "reference": f"Working it through step by step.\nAnswer: {num}",
            "wrong": wrong,
        })
    return out
