"""Synthetic chat turns for the default model (issue #13).

Every answer here is generated from templates written for this project or from the
package text prep_data.py extracts (WordNet glosses, Python docs signatures), so the
data carries the licences of those packages only. Conversations are lists of
{"role", "content", optional "reasoning_content"} dicts, rendered later with the
Qwen chat template in chat_template.jinja.
"""
from __future__ import annotations

import random

SYSTEM_PROMPTS = [
    "You are a helpful assistant.",
    "You are a small, friendly assistant. Answer briefly.",
    "You are ds4, a tiny local language model. Keep answers short and clear.",
]

GREETINGS = [
    ("Hello!", "Hello! How can I help you today?"),
    ("Hi", "Hi there! What would you like to talk about?"),
    ("Hi, how are you?", "I am doing well, thank you. How can I help you?"),
    ("Good morning!", "Good morning! What can I do for you today?"),
    ("Good evening.", "Good evening! How can I help?"),
    ("Hey", "Hey! What can I help you with?"),
    ("Thank you!", "You are welcome! Let me know if you need anything else."),
    ("Thanks a lot.", "Glad I could help."),
    ("Bye", "Goodbye! Have a nice day."),
    ("See you later.", "See you later! Take care."),
    ("Who are you?", "I am a small language model that runs locally with ds4server. "
     "I can answer simple questions, explain words and write short Python functions."),
    ("What is your name?", "My name is ds4. I am a tiny assistant model."),
    ("What can you do?", "I can greet you, explain the meaning of English words, answer "
     "simple questions about Python and write small Python functions with tests."),
    ("Are you a human?", "No, I am a small computer program: a language model."),
    ("Can you help me?", "Of course. Tell me what you need and I will do my best."),
    ("Tell me about yourself.", "I am a very small language model with a few million "
     "parameters. I was trained on Python documentation, a dictionary and short chats."),
    ("How old are you?", "I do not have an age. I am a language model that was trained recently."),
    ("Do you like Python?", "Yes! Python is a clear and friendly programming language."),
    ("Say something nice.", "You are doing great. Every question is a step toward learning something new."),
    ("What time is it?", "I cannot see a clock, so I do not know the current time."),
]

EXPLAIN = {
    "a list in Python": "A list is an ordered, changeable collection of items. You write it with "
    "square brackets, for example [1, 2, 3], and you can add items with append().",
    "a dictionary in Python": "A dictionary maps keys to values. You write it with curly braces, "
    "for example {\"a\": 1}, and look a value up with d[\"a\"].",
    "a tuple in Python": "A tuple is an ordered collection that cannot be changed after it is "
    "created. You write it with parentheses, for example (1, 2).",
    "a function": "A function is a named block of code that takes inputs, does some work and "
    "can return a result. In Python you define one with the def keyword.",
    "a loop": "A loop repeats a block of code. Python has for loops, which go over the items "
    "of a sequence, and while loops, which run as long as a condition is true.",
    "a variable": "A variable is a name that refers to a value, such as x = 5. You can use the "
    "name later to read the value.",
    "recursion": "Recursion is when a function calls itself to solve a smaller version of the "
    "same problem, until it reaches a simple base case.",
    "an assert statement": "An assert statement checks that a condition is true. If the "
    "condition is false, Python raises an AssertionError.",
    "a string": "A string is a sequence of characters, such as \"hello\". In Python strings are "
    "written in single or double quotes.",
    "an integer": "An integer is a whole number without a fractional part, such as 3, 0 or -7.",
    "a class": "A class is a blueprint for objects. It groups data and the functions that work "
    "on that data, called methods.",
    "an exception": "An exception is an error that happens while a program runs. You can catch "
    "it with try and except.",
    "a module": "A module is a file of Python code that you can import into other programs "
    "with the import statement.",
    "the sun": "The sun is the star at the center of our solar system. It gives the earth light "
    "and heat.",
    "water": "Water is a clear liquid made of hydrogen and oxygen. All known forms of life need it.",
    "the moon": "The moon is the natural satellite of the earth. It goes around the earth about "
    "once a month.",
    "rain": "Rain is water that falls from clouds in drops. It forms when water vapour in the air "
    "cools and condenses.",
    "a computer": "A computer is a machine that follows instructions, called programs, to store "
    "and process information.",
    "a language model": "A language model is a program that predicts the next word or token in "
    "a text. It can be used to answer questions and write text.",
    "a tree": "A tree is a tall plant with a woody trunk, branches and leaves.",
    "music": "Music is sound arranged in time, with rhythm, melody and harmony, made to be "
    "enjoyed.",
    "a prime number": "A prime number is a whole number greater than 1 that has no divisors "
    "other than 1 and itself, such as 2, 3, 5 and 7.",
    "an even number": "An even number is an integer that can be divided by 2 without a "
    "remainder, such as 2, 4 or 10.",
    "sorting": "Sorting means putting items in order, for example numbers from smallest to "
    "largest. Python has the sorted() function and the list.sort() method.",
    "the internet": "The internet is a worldwide network that connects computers so they can "
    "exchange information.",
    "a server": "A server is a program or computer that waits for requests and sends back "
    "answers, for example web pages.",
    "a cat": "A cat is a small furry animal that people often keep as a pet. Cats like to "
    "sleep, play and hunt mice.",
    "a dog": "A dog is a domestic animal kept as a pet or for work. Dogs are loyal and like to "
    "play and go for walks.",
    "the ocean": "The ocean is the large body of salt water that covers most of the earth.",
    "a book": "A book is a set of printed or written pages bound together, which people read "
    "to learn or for fun.",
}
EXPLAIN_Q = ["What is {}?", "Explain {}.", "Can you explain {}?", "Tell me about {}.",
             "What does {} mean?", "Please explain {} in simple words."]

REASONING = {
    "greet": "The user is greeting me. I should answer politely and offer help.",
    "define": "The user asks what a word means. I will give a short definition.",
    "explain": "The user wants a short explanation. I will answer in two simple sentences.",
    "code": "The user wants a Python function. I will write it and add asserts that test it.",
    "math": "This is simple arithmetic. I will compute the result.",
    "pydoc": "The user asks about the Python standard library. I will summarize the documentation.",
}

# (task text, function name, args, body lines, assert lines) -- small, verified by prep_data.
CODE_TASKS = [
    ("adds two numbers", "add", "a, b", ["return a + b"],
     ["add(2, 3) == 5", "add(-1, 1) == 0"]),
    ("multiplies two numbers", "multiply", "a, b", ["return a * b"],
     ["multiply(3, 4) == 12", "multiply(0, 9) == 0"]),
    ("returns the square of a number", "square", "n", ["return n * n"],
     ["square(3) == 9", "square(-2) == 4"]),
    ("checks if a number is even", "is_even", "n", ["return n % 2 == 0"],
     ["is_even(4)", "not is_even(7)"]),
    ("checks if a number is odd", "is_odd", "n", ["return n % 2 == 1"],
     ["is_odd(3)", "not is_odd(10)"]),
    ("reverses a string", "reverse_string", "s", ["return s[::-1]"],
     ["reverse_string(\"abc\") == \"cba\"", "reverse_string(\"\") == \"\""]),
    ("returns the largest item of a list", "largest", "items",
     ["best = items[0]", "for x in items:", "    if x > best:", "        best = x", "return best"],
     ["largest([1, 5, 3]) == 5", "largest([-2, -9]) == -2"]),
    ("returns the smallest item of a list", "smallest", "items",
     ["best = items[0]", "for x in items:", "    if x < best:", "        best = x", "return best"],
     ["smallest([4, 2, 8]) == 2", "smallest([7]) == 7"]),
    ("computes the factorial of n", "factorial", "n",
     ["result = 1", "for i in range(2, n + 1):", "    result *= i", "return result"],
     ["factorial(0) == 1", "factorial(5) == 120"]),
    ("returns the n-th Fibonacci number", "fibonacci", "n",
     ["a, b = 0, 1", "for _ in range(n):", "    a, b = b, a + b", "return a"],
     ["fibonacci(0) == 0", "fibonacci(10) == 55"]),
    ("counts the vowels in a string", "count_vowels", "s",
     ["return sum(1 for c in s.lower() if c in \"aeiou\")"],
     ["count_vowels(\"hello\") == 2", "count_vowels(\"xyz\") == 0"]),
    ("sums a list of numbers", "sum_list", "numbers",
     ["total = 0", "for x in numbers:", "    total += x", "return total"],
     ["sum_list([1, 2, 3]) == 6", "sum_list([]) == 0"]),
    ("returns the average of a list of numbers", "average", "numbers",
     ["return sum(numbers) / len(numbers)"],
     ["average([2, 4]) == 3", "average([5]) == 5"]),
    ("checks if a string is a palindrome", "is_palindrome", "s",
     ["return s == s[::-1]"],
     ["is_palindrome(\"level\")", "not is_palindrome(\"hello\")"]),
    ("checks if a number is prime", "is_prime", "n",
     ["if n < 2:", "    return False", "for d in range(2, int(n ** 0.5) + 1):",
      "    if n % d == 0:", "        return False", "return True"],
     ["is_prime(7)", "not is_prime(9)", "not is_prime(1)"]),
    ("converts Celsius to Fahrenheit", "celsius_to_fahrenheit", "c",
     ["return c * 9 / 5 + 32"],
     ["celsius_to_fahrenheit(0) == 32", "celsius_to_fahrenheit(100) == 212"]),
    ("returns the absolute value of a number", "absolute", "n",
     ["return -n if n < 0 else n"], ["absolute(-3) == 3", "absolute(4) == 4"]),
    ("counts how often a value appears in a list", "count_value", "items, value",
     ["return sum(1 for x in items if x == value)"],
     ["count_value([1, 2, 1], 1) == 2", "count_value([], 5) == 0"]),
    ("removes duplicates from a list and keeps the order", "unique", "items",
     ["seen = set()", "out = []", "for x in items:", "    if x not in seen:",
      "        seen.add(x)", "        out.append(x)", "return out"],
     ["unique([1, 2, 1, 3]) == [1, 2, 3]", "unique([]) == []"]),
    ("returns the length of a string without using len", "string_length", "s",
     ["count = 0", "for _ in s:", "    count += 1", "return count"],
     ["string_length(\"abc\") == 3", "string_length(\"\") == 0"]),
    ("doubles every number in a list", "double_all", "numbers",
     ["return [2 * x for x in numbers]"], ["double_all([1, 2]) == [2, 4]", "double_all([]) == []"]),
    ("keeps only the even numbers of a list", "only_even", "numbers",
     ["return [x for x in numbers if x % 2 == 0]"],
     ["only_even([1, 2, 3, 4]) == [2, 4]", "only_even([1]) == []"]),
    ("returns the first word of a sentence", "first_word", "sentence",
     ["return sentence.split()[0]"], ["first_word(\"hello world\") == \"hello\""]),
    ("counts the words in a sentence", "count_words", "sentence",
     ["return len(sentence.split())"],
     ["count_words(\"a b c\") == 3", "count_words(\"\") == 0"]),
    ("makes a string upper case", "shout", "s", ["return s.upper()"],
     ["shout(\"hi\") == \"HI\""]),
    ("returns the maximum of two numbers", "max_of_two", "a, b",
     ["return a if a > b else b"], ["max_of_two(3, 7) == 7", "max_of_two(5, 2) == 5"]),
    ("computes the greatest common divisor of two numbers", "gcd", "a, b",
     ["while b:", "    a, b = b, a % b", "return a"], ["gcd(12, 8) == 4", "gcd(7, 3) == 1"]),
    ("computes the power a to the b", "power", "a, b",
     ["result = 1", "for _ in range(b):", "    result *= a", "return result"],
     ["power(2, 10) == 1024", "power(5, 0) == 1"]),
]
CODE_Q = ["Write a Python function that {}.", "Write a function in Python that {}.",
          "Can you write a Python function that {}?", "Please write Python code for a function that {}.",
          "I need a Python function that {}. Add some tests."]

NUM_WORDS = {"plus": "+", "minus": "-", "times": "*"}


def code_answer(task, name, args, body, asserts):
    lines = [f"def {name}({args}):"] + ["    " + b for b in body] + [""]
    lines += [f"assert {a}" for a in asserts]
    code = "\n".join(lines)
    return (f"Here is a function that {task}:\n\n```python\n{code}\n```\n\n"
            f"The asserts at the end check that `{name}` works.")


def verify_code_tasks():
    """Run every code answer so a wrong template can never ship as training data."""
    for task, name, args, body, asserts in CODE_TASKS:
        src = code_answer(task, name, args, body, asserts).split("```python\n")[1].split("```")[0]
        exec(compile(src, name, "exec"), {})


def gen_greeting(rng):
    q, a = rng.choice(GREETINGS)
    return q, a, "greet"


def gen_explain(rng):
    topic, text = rng.choice(list(EXPLAIN.items()))
    return rng.choice(EXPLAIN_Q).format(topic), text, "explain"


def gen_code(rng):
    task, name, args, body, asserts = rng.choice(CODE_TASKS)
    return rng.choice(CODE_Q).format(task), code_answer(task, name, args, body, asserts), "code"


def gen_math(rng):
    a, b = rng.randint(0, 20), rng.randint(0, 20)
    word = rng.choice(list(NUM_WORDS))
    if word == "minus" and b > a:
        a, b = b, a
    res = eval(f"{a} {NUM_WORDS[word]} {b}")
    q = rng.choice([f"What is {a} {word} {b}?", f"What is {a} {NUM_WORDS[word]} {b}?",
                    f"Compute {a} {NUM_WORDS[word]} {b}."])
    return q, f"{a} {word} {b} is {res}.", "math"


def gen_define(rng, wordnet):
    word, pos, gloss, examples = rng.choice(wordnet)
    q = rng.choice([f"What does \"{word}\" mean?", f"Define the word \"{word}\".",
                    f"What is the meaning of {word}?", f"What is a {word}?" if pos == "noun"
                    else f"What does it mean to be {word}?" if pos == "adjective"
                    else f"What does \"{word}\" mean?"])
    a = f"\"{word[0].upper() + word[1:]}\" is a {pos}. It means: {gloss}."
    if examples:
        a += f" For example: \"{examples[0]}\"."
    return q, a, "define"


def gen_pydoc(rng, pydoc):
    name, summary = rng.choice(pydoc)
    q = rng.choice([f"What does the Python function {name} do?", f"What is {name} in Python?",
                    f"Explain {name} from the Python standard library."])
    return q, f"`{name}`: {summary}", "pydoc"


def make_conversation(rng, wordnet, pydoc):
    gens = [(gen_greeting, 2), (gen_explain, 2), (gen_code, 3), (gen_math, 1),
            (lambda r: gen_define(r, wordnet), 4), (lambda r: gen_pydoc(r, pydoc), 2)]
    fns = [g for g, w in gens for _ in range(w)]
    turns = rng.choice([1, 1, 1, 2, 3])
    msgs = []
    if rng.random() < 0.4:
        msgs.append({"role": "system", "content": rng.choice(SYSTEM_PROMPTS)})
    for i in range(turns):
        q, a, kind = rng.choice(fns)(rng)
        msgs.append({"role": "user", "content": q})
        turn = {"role": "assistant", "content": a}
        if i == turns - 1 and rng.random() < 0.3:
            turn["reasoning_content"] = REASONING[kind]
        msgs.append(turn)
    return msgs


def conversations(n, seed, wordnet, pydoc):
    verify_code_tasks()
    rng = random.Random(seed)
    return [make_conversation(rng, wordnet, pydoc) for _ in range(n)]
