"""Write data/drafters/prompts.json: the training and held-out prompt sets for notebook 06's drafters.

Four task kinds: copy (copy, extract or fix a given text), code, story and qa. Two more sets: "more", a
larger free-form training set (stories, questions and everyday requests) that EagleLite also trains on,
and "validation", six free-form prompts for choosing settings, in no training set and not held out.
Passages for the copy prompts come from Python's own pydoc topics, which every Python install carries.
The held-out set uses subjects and passages that the training set never sees.
Deterministic: rerunning gives the same file.
"""

from __future__ import annotations

import itertools
import json
import pydoc_data.topics
import random
import re

from specnotes.prompts import FILE, KINDS

STORY_SUBJECTS = [
    "a lighthouse keeper who finds a message in a bottle", "a robot who wants to learn to bake bread",
    "two rival gardeners in a small village", "a cat that rides the night train", "a girl who maps caves",
    "an old clockmaker and his last clock", "a dragon afraid of the dark", "a fox who opens a library",
    "a sailor lost in fog", "a child who can talk to bees", "the last tree on a windy island",
    "a detective who solves crimes by smell", "a musician who plays for whales", "a city made of glass",
    "a boy who trades his shadow", "a knight with a broken sword", "a snowman who wants to see summer",
    "a baker on the moon", "a painter who paints only doors", "a postman delivering letters to the past",
    "an owl who keeps a diary", "a mountain that moves at night", "a farmer and a talking scarecrow",
    "a ship's cook during a storm", "twin sisters who swap lives", "a ghost who is afraid of people",
    "a tortoise who enters a race again", "a queen who loses her crown", "a spaceship with one passenger",
    "a river that flows uphill", "a bookshop that opens only when it rains", "a teacher on the first day",
]
STORY_FORMS = ["Write a short story about {}.", "Tell me a bedtime story about {}.",
               "Write a short fable about {} and end with its moral.", "Write a funny story about {}."]

QA_SUBJECTS = [
    "photosynthesis", "why the sky is blue", "how vaccines work", "the water cycle", "gravity",
    "how a rainbow forms", "what a black hole is", "how computers store numbers", "the French Revolution",
    "why leaves change colour", "how bees make honey", "what inflation is", "how the heart pumps blood",
    "how tides work", "what DNA does", "why we have seasons", "how airplanes fly", "what an atom is",
    "how volcanoes erupt", "what the internet is", "how a battery works", "why ice floats",
    "how sound travels", "what a neural network is", "how the moon affects Earth", "what a recession is",
    "how plants drink water", "why stars twinkle", "how soap cleans", "what electricity is",
    "how earthquakes happen", "what a prime number is",
]
QA_FORMS = ["Explain {} in simple terms.", "What should a student know about {}?",
            "Answer briefly: can you describe {}?", "Give three facts about {}."]

CODE_TASKS = [
    "reverses a string", "checks whether a number is prime", "counts the words in a sentence",
    "returns the largest item in a list", "computes the factorial of n", "merges two sorted lists",
    "removes duplicates from a list while keeping order", "converts Celsius to Fahrenheit",
    "checks whether a string is a palindrome", "returns the n-th Fibonacci number",
    "flattens a nested list", "counts vowels in a string", "sorts a list of dictionaries by a key",
    "reads a text file and returns its lines", "finds the second smallest number in a list",
    "computes the average of a list of numbers", "capitalizes every word in a sentence",
    "returns the common elements of two lists", "checks whether brackets in a string are balanced",
    "converts a binary string to an integer", "groups words by their first letter",
    "computes the greatest common divisor of two numbers", "rotates a list by k positions",
    "returns a dictionary of character frequencies", "validates a simple email address",
    "splits a list into chunks of size n", "computes the sum of the digits of a number",
    "transposes a matrix given as a list of lists", "finds the longest word in a sentence",
    "implements binary search on a sorted list", "converts a Roman numeral to an integer",
    "returns the running total of a list",
]
CODE_FORMS = ["Write a Python function that {}.", "Write a Python function that {}, with a docstring.",
              "Show a short Python example of a function that {}.", "Write a JavaScript function that {}."]

COPY_FORMS = [
    "Copy the following text exactly, word for word:\n\n{}",
    "Fix the spelling mistakes in this text and return the corrected text:\n\n{}",
    "Repeat the first two sentences of this text:\n\n{}",
    "Rewrite this text as a bulleted list, keeping the wording:\n\n{}",
]


MORE_CHARACTERS = [
    "a shy giraffe", "a retired pirate", "a lonely lighthouse cat", "a young inventor", "a grumpy troll",
    "a curious penguin", "an old fisherman", "a brave mouse", "a forgetful wizard", "a tiny elephant",
    "a kind witch", "a clumsy robot vacuum", "a talking teapot", "a homesick astronaut", "a wise old bear",
    "a nervous firefighter", "a lost puppy", "a village doctor", "a singing frog", "a proud peacock",
    "a sleepy lion", "a young librarian", "a stubborn goat", "a traveling circus clown", "a quiet monk",
    "a playful dolphin", "a hungry caterpillar", "a mapmaker's daughter", "a bored prince", "a clever crow",
]
MORE_SITUATIONS = [
    "who finds a secret door", "who loses the way home", "who wins a baking contest by accident",
    "who learns to swim", "who makes an unlikely friend", "who has to fix a broken bridge",
    "who discovers a hidden garden", "who is afraid of the rain", "who goes on a long journey",
    "who wakes up in a different century", "who must keep a big secret", "who plants a magic seed",
    "who tries to catch the wind", "who starts a small school", "who finds a treasure map",
    "who cannot stop laughing", "who builds a boat from scraps", "who visits a city under the sea",
    "who wants to touch the stars", "who gives away everything",
]
MORE_STORY_FORMS = ["Write a short story about {}.", "Tell me a bedtime story about {}.",
               "Write a short fable about {} and end with its moral.", "Write a funny story about {}.",
               "Write a story for children about {}.", "Write a short adventure story about {}."]

MORE_QA_TOPICS = [
    "how rain forms", "why the ocean is salty", "how a compass works", "what a volcano is",
    "how fish breathe", "why we sleep", "how the eye sees colour", "what a cell is", "how bridges stay up",
    "what climate change is", "how glaciers move", "why the moon has phases", "how magnets work",
    "what a gene is", "how clouds form", "what bacteria are", "how a refrigerator works", "why bread rises",
    "how muscles grow", "what lightning is", "how the stomach digests food", "what an ecosystem is",
    "how solar panels work", "why birds migrate", "how a telescope works", "what friction is",
    "how the lungs work", "what a planet is", "how coral reefs form", "what erosion is",
    "how a car engine works", "why metal rusts", "how wind turbines make power", "what a fossil is",
    "how the brain stores memories", "what the ozone layer is", "how a microwave oven works",
    "why we need vitamins", "how rivers shape valleys", "what a comet is", "how the immune system works",
    "what evaporation is", "how a thermometer works", "why some animals hibernate", "how paper is made",
    "what a democracy is", "how money works", "what supply and demand means", "how a bank works",
    "what the Roman Empire was", "why the pyramids were built", "what the Industrial Revolution was",
    "how printing changed the world", "what a map projection is", "how languages change over time",
    "what a healthy diet is", "why exercise is good for you", "how to study well", "what a budget is",
    "how recycling works", "what an algorithm is", "how a search engine works", "what a password manager is",
    "how email works", "what a spreadsheet is", "how GPS works", "what encryption is", "how a website loads",
    "what renewable energy is", "why the desert is cold at night", "how ants find food", "what pollen is",
    "how sharks hunt", "why cats purr", "how a seed grows", "what a hurricane is", "how snowflakes form",
    "what the speed of light is", "how sound is recorded", "what a calorie is", "how vaccines are tested",
    "what an election is", "how a law is made", "what a museum does", "how the Olympic games began",
    "why we have time zones", "how a clock keeps time", "what a language model is", "how trains run on rails",
]
MORE_QA_FORMS = ["Explain {} in simple terms.", "What should a student know about {}?",
            "Answer briefly: can you describe {}?", "Give three facts about {}.",
            "Explain {} to a ten-year-old.", "Write a short paragraph about {}."]

MORE_OTHER = [
    "Write a polite email asking a neighbour to turn down their music.",
    "Write a thank-you note to a teacher.", "Give me five tips for staying focused while studying.",
    "Describe a busy market in the morning.", "Describe a quiet beach at sunset.",
    "Write a short poem about autumn leaves.", "Write a short poem about the sea.",
    "Give advice to someone starting their first job.", "List some healthy breakfast ideas.",
    "Write a short speech for a friend's birthday.", "Describe your perfect weekend.",
    "Give three reasons to learn a second language.", "Write a short review of an imaginary restaurant.",
    "Plan a one-day trip to the mountains.", "Write a diary entry about a rainy day.",
    "Give tips for keeping a plant alive indoors.", "Describe how to make a cup of tea.",
    "Write a letter to your future self.", "Compare cats and dogs as pets.",
    "Give advice on how to save money.", "Describe a forest in winter.",
    "Write a short poem about the city at night.", "Explain how to ride a bicycle.",
    "Give tips for a good night's sleep.", "Describe a thunderstorm.",
    "Write a motivational message for a student before exams.", "Suggest names for a new bakery.",
    "Write an invitation to a garden party.", "Describe the job of a firefighter.",
    "Give five ideas for a rainy afternoon.",
]

# For choosing settings (EagleLite's confidence gate): in no training set and not held out.
VALIDATION = [
    {"kind": "story", "text": "Write a short story about a shy giraffe who plants a magic seed."},
    {"kind": "story", "text": "Tell me a bedtime story about a retired pirate who learns to swim."},
    {"kind": "story", "text": "Write a funny story about a quiet monk who cannot stop laughing."},
    {"kind": "qa", "text": "Explain how a kite flies in simple terms."},
    {"kind": "qa", "text": "What should a student know about why onions make you cry?"},
    {"kind": "qa", "text": "Give three facts about deserts."},
]


def build_more(seed: int = 7) -> list[dict]:
    """The larger free-form set EagleLite trains on: stories from character x situation pairs, questions
    on topics of their own, and a few other everyday requests. None of its subjects is a held-out one."""
    rng = random.Random(seed)
    pairs = list(itertools.product(MORE_CHARACTERS, MORE_SITUATIONS))
    rng.shuffle(pairs)
    stories = [{"kind": "story", "text": MORE_STORY_FORMS[i % len(MORE_STORY_FORMS)].format(f"{c} {s}")}
               for i, (c, s) in enumerate(pairs[:480])]
    qa = [{"kind": "qa", "text": form.format(topic)} for topic in MORE_QA_TOPICS
          for form in rng.sample(MORE_QA_FORMS, 4)]
    return stories + qa + [{"kind": "other", "text": text} for text in MORE_OTHER]


def passages() -> list[str]:
    """Clean first paragraphs of the pydoc topics, 200-500 characters each, in a fixed order."""
    out = []
    for name in sorted(pydoc_data.topics.topics):
        text = pydoc_data.topics.topics[name]
        paras = [re.sub(r"\s+", " ", p).strip() for p in text.split("\n\n")]
        for p in paras:
            if 200 <= len(p) <= 500 and not re.search(r"[*:=]{3}|::|\|", p):
                out.append(p)
                break
    return out


def typos(text: str, rng: random.Random) -> str:
    """Swap two adjacent letters in about one word in eight."""
    words = text.split(" ")
    for i, w in enumerate(words):
        if len(w) > 4 and w.isalpha() and rng.random() < 0.125:
            j = rng.randrange(1, len(w) - 2)
            words[i] = w[:j] + w[j + 1] + w[j] + w[j + 2:]
    return " ".join(words)


def build(n_heldout_per_kind: int = 8) -> dict:
    rng = random.Random(6)
    # each subject gets one form, cycling, so the forms are spread evenly
    kinds = {}
    kinds["story"] = [STORY_FORMS[i % 4].format(s) for i, s in enumerate(STORY_SUBJECTS)]
    kinds["qa"] = [QA_FORMS[i % 4].format(s) for i, s in enumerate(QA_SUBJECTS)]
    kinds["code"] = [CODE_FORMS[i % 4].format(s) for i, s in enumerate(CODE_TASKS)]
    texts = passages()
    copy = []
    for i, p in enumerate(texts):
        form = COPY_FORMS[i % 4]
        copy.append(form.format(typos(p, rng) if "spelling" in form else p))
    kinds["copy"] = copy
    train, heldout = [], []
    for kind, prompts in kinds.items():
        order = list(range(len(prompts)))
        rng.shuffle(order)
        for rank, i in enumerate(order):
            (heldout if rank < n_heldout_per_kind else train).append({"kind": kind, "text": prompts[i]})
    return {"about": "Prompts for notebook 06's drafters; written by tools/make_prompts.py.",
            "train": train, "heldout": heldout, "more": build_more(),
            "validation": VALIDATION}


if __name__ == "__main__":
    data = build()
    FILE.parent.mkdir(parents=True, exist_ok=True)
    FILE.write_text(json.dumps(data, indent=1) + "\n")
    counts = {k: sum(p["kind"] == k for p in data["train"]) for k in KINDS}
    print(f"wrote {FILE}: train {counts}, heldout {len(data['heldout'])}, more {len(data['more'])}, "
          f"validation {len(data['validation'])}")
