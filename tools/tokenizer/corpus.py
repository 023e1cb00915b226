#!/usr/bin/env python3
"""Deterministic tokenizer test/bench corpus (generated, never committed).

corpus(n, seed) -> list of bytes objects: many scripts, code, emoji/ZWJ/flags, long
whitespace and digit runs, special-token look-alikes, Unicode normalization traps, invalid
UTF-8 and random code points. Same seed, same corpus, on every machine.
"""
import random

SENTENCES = [
    "The quick brown fox jumps over the lazy dog; it's 5 o'clock and we'll see.",
    "Der Weg zur Größe führt über Übung: ändern, prüfen, wiederholen.",
    "Le cœur a ses raisons que la raison ne connaît point, n'est-ce pas?",
    "¿Dónde está la biblioteca? ¡Aquí, señor!",
    "Быстрая коричневая лиса прыгает через ленивую собаку.",
    "Η γρήγορη καφέ αλεπού πηδάει πάνω από τον τεμπέλη σκύλο.",
    "الثعلب البني السريع يقفز فوق الكلب الكسول.",
    "השועל החום המהיר קופץ מעל הכלב העצלן.",
    "तेज़ भूरी लोमड़ी आलसी कुत्ते के ऊपर कूदती है।",
    "สุนัขจิ้งจอกสีน้ำตาลกระโดดข้ามสุนัขขี้เกียจ",
    "敏捷的棕色狐狸跳过了懒狗。今天天气很好，我们去公园散步吧！",
    "素早い茶色の狐が怠け者の犬を飛び越える。カタカナとひらがな。",
    "빠른 갈색 여우가 게으른 개를 뛰어넘는다. 안녕하세요!",
    "სწრაფი ყავისფერი მელა ხტება ზარმაც ძაღლზე.",
    "Արագ շագանակագույն աղվեսը ցատկում է ծույլ շան վրայով։",
    "ፈጣኑ ቡናማ ቀበሮ ሰነፉን ውሻ ዘለለ።",
    "விரைவான பழுப்பு நரி சோம்பேறி நாயின் மேல் குதிக்கிறது.",
    "দ্রুত বাদামী শিয়াল অলস কুকুরের উপর লাফিয়ে পড়ে।",
    "Tiếng Việt có dấu: Trường, Nguyễn, điều, ước mơ.",
    "Zażółć gęślą jaźń. Příliš žluťoučký kůň úpěl ďábelské ódy.",
    "I'M SURE THEY'LL SAY IT'S FINE; YOU'RE RIGHT, WE'VE DONE IT'D.",
]
CODE = [
    "def is_prime(n: int) -> bool:\n    if n < 2:\n        return False\n    for d in range(2, int(n ** 0.5) + 1):\n        if n % d == 0:\n            return False\n    return True\n",
    "#include <stdio.h>\nint main(void) {\n\tprintf(\"%d\\n\", 42);\n\treturn 0;\n}\n",
    "const f = async (x) => { await fetch(`/api/${x}?q=1&r=2`); return x?.y ?? null; };",
    "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": [1, 2, 3], \"ok\": true}}",
    "<div class=\"row\"><a href='https://example.com/a_b-c?d=e#f'>link</a></div>",
    "SELECT id, name FROM users WHERE age >= 18 AND name LIKE '%ann%' ORDER BY id DESC;",
    "fn main() { let v: Vec<u8> = (0..=255).collect(); println!(\"{:?}\", &v[..4]); }",
    "    x += 1  # comment\r\n\r\n\tif (a && b || !c) { return a->b[i]++; }",
    "$ git log --oneline | head -n 20 && make -j2 2>&1 | grep -E 'error|warning'",
]
EMOJI = ["😀", "👍🏽", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🇩🇪", "🇯🇵", "1️⃣", "❤️", "🧑🏿‍💻", "👩‍❤️‍💋‍👨", "🤷‍♀️", "🫶🏻", "☕", "🐍"]
SPACES = [" ", "  ", "\t", "\n", "\r\n", "\r", "\u00a0", "\u3000", "\u2028", "\u0085", "\u2003", "\u200b", "\f", "\v"]
DIGITS = "0123456789"
OTHER_DIGITS = ["٠١٢٣٤٥٦٧٨٩", "０１２３４５６７８９", "²³¹", "Ⅻ", "½¾", "߀߁", "१२३"]
LOOKALIKES = [
    "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<think>", "</think>", "<tool_call>", "</tool_call>",
    "<tool_response>", "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜User｜>", "<｜Assistant｜>",
    "｜DSML｜", "<｜DSML｜tool_calls>", "[gMASK]", "<sop>", "<|user|>", "<|assistant|>", "<|observation|>",
    "<arg_key>", "</arg_value>", "<|im_start", "im_end|>", "<｜User", "<<think>>", "<|<|im_end|>|>",
    "< think>", "<THINK>", "<|IM_END|>", "<|system|>", "/nothink", "<｜tool▁calls▁begin｜>",
]
COMBINING = ["\u0301", "\u0308", "\u0338", "\u0327", "\u20dd", "\u0300\u0323"]
NFC_TRAPS = ["e\u0301", "A\u030a", "\u1100\u1161\u11a8", "\u0041\u0308\u0301", "Å", "ﬁ", "ｶﾞ", "\u212b", "\u2126",
             ">\u0338", "=\u0338", "<\u0338"]
RANGES = [(0x20, 0x7E), (0xA0, 0x24F), (0x300, 0x36F), (0x370, 0x3FF), (0x400, 0x4FF), (0x590, 0x6FF),
          (0x900, 0x97F), (0xE00, 0xE7F), (0x1100, 0x11FF), (0x2000, 0x206F), (0x2190, 0x23FF),
          (0x3000, 0x30FF), (0x4E00, 0x9FFF), (0xAC00, 0xD7A3), (0xFF00, 0xFFEF), (0x1F300, 0x1FAFF),
          (0x10000, 0x1007F), (0xE000, 0xE0FF), (0x0, 0x1F)]
INVALID = [b"\xff", b"\xfe", b"\xc0\x80", b"\xe2\x82", b"\xf0\x9f\x98", b"\xed\xa0\x80", b"\xf5\x80\x80\x80",
           b"\x80", b"\xbf\xbf", b"\xe0\x80\xaf", b"\xf4\x90\x80\x80", b"\xc3", b"\xe2\x28\xa1"]


def _rand_cp(rng):
    lo, hi = rng.choice(RANGES)
    return chr(rng.randint(lo, hi))


def _words(rng, n):
    src = rng.choice(SENTENCES).split()
    return " ".join(rng.choice(src) for _ in range(n))


def _gen(kind, rng):
    if kind == 0:
        return _words(rng, rng.randint(1, 30)) + rng.choice(["", ".", "!", "?", "\n", "  "])
    if kind == 1:
        s = rng.choice(CODE)
        indent = " " * rng.randint(0, 12)
        return "".join(indent + line + "\n" for line in s.splitlines()[: rng.randint(1, 8)])
    if kind == 2:
        return "".join(rng.choice(EMOJI + [" ", "a", "ok ", "\u200d", "\ufe0f"]) for _ in range(rng.randint(1, 20)))
    if kind == 3:
        parts = [rng.choice(SPACES) * rng.randint(1, 50) for _ in range(rng.randint(1, 6))]
        if rng.random() < 0.05:
            parts.append(" " * rng.randint(500, 3000))
        return rng.choice(["", "x", "word"]) + "".join(parts) + rng.choice(["", "y", "\n", "end"])
    if kind == 4:
        d = "".join(rng.choice(DIGITS) for _ in range(rng.randint(1, 300 if rng.random() < 0.1 else 25)))
        return rng.choice(["", "v", "$", " ", "x="]) + d + rng.choice(["", rng.choice(OTHER_DIGITS), ".5", "%", " apples"])
    if kind == 5:
        toks = [rng.choice(LOOKALIKES + [" ", "\n", "text", "x"]) for _ in range(rng.randint(1, 8))]
        if rng.random() < 0.3:
            toks.append(rng.choice(COMBINING))
        return "".join(toks)
    if kind == 6:
        return "".join(rng.choice(NFC_TRAPS + COMBINING + [" ", "a", "Z"]) for _ in range(rng.randint(1, 12)))
    if kind == 7:
        return "".join(_rand_cp(rng) for _ in range(rng.randint(1, 40)))
    if kind == 8:
        return "".join(rng.choice(["'s", "'S", "'lL", "'RE", "'ve", "'d", "'m", " '", "’s", "n't", "I"]) for _ in range(rng.randint(1, 10)))
    return _words(rng, 3) + rng.choice(SPACES) + _words(rng, 3)


def corpus(n=22000, seed=20261130):
    rng = random.Random(seed)
    out = []
    for i in range(n):
        kind = i % 11
        if kind == 10:
            # Invalid UTF-8: valid text with broken bytes spliced in.
            base = _gen(rng.randint(0, 8), rng).encode("utf-8")
            for _ in range(rng.randint(1, 3)):
                p = rng.randint(0, len(base))
                base = base[:p] + rng.choice(INVALID) + base[p:]
            out.append(base)
        else:
            out.append(_gen(kind, rng).encode("utf-8", "surrogatepass"))
    return out


if __name__ == "__main__":
    c = corpus()
    print(len(c), sum(map(len, c)), "bytes")
