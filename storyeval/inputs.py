"""Input checks shared by every scorer and metric: clear errors, nothing changed."""
from __future__ import annotations

import argparse
import math
import operator
import re
import unicodedata
from collections import Counter
from collections.abc import Sequence

# precisions the scorers accept; names only, so the CLI's --help needs no torch import
FLOAT_DTYPE_NAMES = ("float32", "bfloat16", "float16")
# int8: the story classifiers only, through an int8 runtime on the CPU (storyeval.scoring.int8.runtime)
DTYPE_NAMES = (*FLOAT_DTYPE_NAMES, "int8")


# marks sentence ends in the plot-guided releases; the scorers split on it and drop it
SENTENCE_SEPARATOR = "</s>"
# run through a scorer's text side when it loads, so that missing NLTK data is an error then, not at its first score
PROBE_STORY = "Ken went home. He slept."


def has_words(text: str) -> bool:
    """Whether ``text`` has a letter outside sentence separators. Digits and punctuation alone are not a
    story ("12345 67890" would otherwise score like one), and str.strip() keeps zero-width and format
    characters, which the tokenizers drop."""
    return any(character.isalpha() for character in text.replace(SENTENCE_SEPARATOR, " "))


# ---- English or not ------------------------------------------------------------------------------------------
# Every checkpoint was trained on English stories, and a text in another language gets a score as confident as an
# English one's, and as meaningless. The check is two cheap ratios, no model: which script the letters are in, and,
# for Latin letters, how many words are English function words against how many are those of other European
# languages (or, for languages without a list, how many letters are accented). The word lists are written out here
# rather than read from NLTK's stopwords corpus so that the check gives the same answer with or without NLTK data,
# and before NLTK is imported (the command line checks a whole file before it loads a model). Only text that is
# clearly not English is flagged: a keyword list or a line of names has few English function words, but none of
# another language either, and is left alone. docs/inputs.md gives the rates measured on English corpora and on
# other languages, and tests/test_language.py measures them again.

ENGLISH_FUNCTION_WORDS = frozenset("""
a an the and or but nor so yet if then than because though although while whether of to in on at for with from by as
into onto about above below after before over under up out down off through between against during without within
until upon is was were be been being are am isn wasn weren aren it its he she they his her hers their theirs them him
himself herself themselves itself i you we my mine our ours your yours me us myself ourselves yourself that this these
those there here what when where which who whom whose why how would could should will shall can may might must did do
does done doing had has have having not no don didn doesn couldn wouldn shouldn won just very too all any some
each every both either neither such only also again ever never always still even more most much many few other another
s t d ll re ve m
""".split())
# common function words of other languages written in Latin letters, leaving out any that is also an English word or
# name a story may use often (German "er", Spanish "con", "al", "nada", Italian "per", "come", Dutch "door", "met",
# "van", Swedish "men", "till", "min", Polish "one", "ten", Portuguese "um", "em", "ali", "na" as in "gon na")
OTHER_FUNCTION_WORDS = {
    language: frozenset(words.split()) - ENGLISH_FUNCTION_WORDS
    for language, words in {
        "German": "der das und ist nicht ich sie es ein eine einen einem einer dem des mit auf für von zu sich dass daß "
                  "auch nach wie aber noch nur oder wenn sind hatte hatten wurde wurden wir ihr sein seine ihre zum zur "
                  "vom bei aus über schon dann doch kein keine mein meine mich mir dich dir ihm ihn uns habe haben wird "
                  "werden ganz sehr dieser diese dieses jetzt hier immer wieder einmal etwas nichts alles viel mehr unter "
                  "zwischen durch gegen ohne wo warum weil damit selbst meinem meinen seinem seinen ihrem ihren unser unsere "
                  "euch",
        "French": "le la les et est de un une des du que qui dans pour pas sur il elle ne au aux avec ses cette ces nous "
                  "vous ils elles mais où été était avait avaient je tu leur leurs lui sont ont fait très comme ça se ce cet "
                  "à être avoir aussi bien tout tous toute encore puis alors donc quand mes tes nos vos moi toi eux rien "
                  "jamais toujours depuis pendant sans sous chez vers entre parce déjà ici là peu beaucoup notre votre "
                  "même autre autres",
        "Spanish": "el la los las y es de un una del que en por para se su sus pero como más muy fue estaba ella él nos "
                   "esta este eso ese esa sobre cuando donde porque también había tiene le les mi te está están ser fueron "
                   "hasta desde pues entonces aunque mientras todo todos toda todas algo alguien nunca siempre ahora "
                   "aquí allí otro otra otros mucha muchos poco qué quién cuál sí ni nuestro nuestra usted ustedes "
                   "ellos ellas mis tus fui",
        "Italian": "il la di che sono della del nel nella anche più gli alla questo questa lui lei hanno mi ti si ci "
                   "perché quando un una uno è erano aveva essere loro suo sua dei delle questi quelli quello quella "
                   "sempre ancora mai dopo prima poi già ora qui là tutto tutti tutta niente nulla qualcosa molto poco "
                   "cosa dove mentre senza tra fra nostro nostra vostro io tu noi voi stato stata",
        "Portuguese": "os de uma não para mas como mais ele ela eles muito foi estava seu sua ao dos das isso isto você é "
                      "são tinha também quando dele dela deles meu minha meus minhas seus suas nos nas pelo pela pelos "
                      "pelas num numa lhe já até sem onde esse essa este esta aquele aquela então depois ainda sempre "
                      "nunca tudo todos todas algo alguém aqui tem foram estão está ficou",
        "Dutch": "het de een en ik te dat niet zijn op aan als voor maar ze hij zij wat nog naar ook wel geen mijn uit "
                 "bij heb heeft werd zich deze dit daar hier toen nu niets iets alles altijd nooit waar waarom omdat want "
                 "zou zullen kunnen moet moest hebben haar jij je jullie onze ons",
        "Swedish": "och att det som en på är av för med de inte om ett var jag sig så när från hade skulle vid eller mot "
                   "sitt sina hans hennes också bara där vi ni mitt mina ditt dina vår våra deras någon något "
                   "inget ingen alla mycket nu då här hur varför eftersom efter innan redan aldrig alltid kunde "
                   "ville blev",
        "Polish": "w z się nie że jak o po tak od za ja mu jej jego był była było już tylko przez dla bardzo jeszcze "
                  "który która które gdy kiedy mnie sobie tym tego tej tych ci wy oni jestem jesteś są będzie "
                  "bez przy pod nad przed między więc też także nawet zawsze nigdy teraz tu gdzie dlaczego "
                  "ponieważ",
    }.items()
}
MIN_LETTERS = 4  # fewer letters than this say nothing about a script
MIN_WORDS = 5  # nor fewer words about a language
NON_LATIN_SHARE = 0.5  # more of the letters than this in another script: not English
# a Latin-script text reads as another language when at least this share of its words are that language's function
# words, and more of them than English ones (English prose has 40-50% English function words and almost none of the
# other lists': docs/inputs.md)
OTHER_LANGUAGE_SHARE = 0.15
# or, for languages without a list (Czech, Turkish, Vietnamese ...): this share of its Latin letters accented, with
# few English function words (English stories have at most 2% accented letters: docs/inputs.md)
ACCENTED_SHARE = 0.05
ENGLISH_SHARE_FLOOR = 0.2
_WORD = re.compile(r"[^\W\d_]+")
_ASCII_LETTER = re.compile(r"[A-Za-z]")
_NON_ASCII = re.compile(r"[^\x00-\x7f]")
SCRIPT_NAMES = {"CJK": "Chinese or Japanese (CJK)", "HIRAGANA": "Japanese", "KATAKANA": "Japanese", "HANGUL": "Korean"}


def letter_script(character: str) -> str:
    """The Unicode script of a letter, from its name ("CYRILLIC SMALL LETTER A": CYRILLIC); ASCII is LATIN."""
    if character < "\x80":
        return "LATIN"
    name = unicodedata.name(character, "")
    if "LATIN" in name.split()[:2]:  # LATIN SMALL LETTER E WITH ACUTE, FULLWIDTH LATIN CAPITAL LETTER A
        return "LATIN"
    return name.split(" ", 1)[0] if name else "UNKNOWN"


def language_problem(text: str) -> str | None:
    """Why ``text`` is clearly not English (another script; another language's function words), or None.

    Texts too short to tell (under :data:`MIN_LETTERS` letters, or :data:`MIN_WORDS` Latin-script words) pass."""
    text = text.replace(SENTENCE_SEPARATOR, " ")
    # ASCII letters counted in C; only the other characters (few in English) are looked up one by one
    scripts = Counter(letter_script(c) for c in _NON_ASCII.findall(text) if c.isalpha())
    accented = scripts["LATIN"]
    scripts["LATIN"] += len(_ASCII_LETTER.findall(text))
    letters = sum(scripts.values())
    if letters < MIN_LETTERS:
        return None
    if scripts["LATIN"] / letters <= NON_LATIN_SHARE:
        script, count = max(((s, n) for s, n in scripts.items() if s != "LATIN"), key=lambda item: item[1])
        return f"{count / letters:.0%} of its letters are {SCRIPT_NAMES.get(script, script.title())}"
    words = Counter(_WORD.findall(text.lower()))
    total = sum(words.values())
    if total < MIN_WORDS:
        return None
    english = sum(n for word, n in words.items() if word in ENGLISH_FUNCTION_WORDS) / total
    language, share = max(((language, sum(words[word] for word in listed if word in words) / total)
                           for language, listed in OTHER_FUNCTION_WORDS.items()), key=lambda item: item[1])
    if share >= OTHER_LANGUAGE_SHARE and share > english:
        return f"it reads as {language}: {share:.0%} of its words are {language} function words, {english:.0%} English ones"
    accented /= scripts["LATIN"]
    if accented >= ACCENTED_SHARE and english < ENGLISH_SHARE_FLOOR:
        return f"{accented:.0%} of its letters are accented and {english:.0%} of its words are English function words"
    return None


def preview(text: str, width: int = 60) -> str:
    """The start of a text for a message: the whole text when short, else its first ``width`` characters and "..."."""
    return repr(text) if len(text) <= width else repr(text[:width]) + "..."


def check_texts(texts, name: str = "predictions") -> list[str]:
    """A list of strings with words in them, or a TypeError / ValueError naming the bad item."""
    texts = check_strings(texts, name)
    for index, text in enumerate(texts):
        if problem := text_problem(text):
            raise ValueError(f"{name}[{index}] {problem}")
    return texts


def check_strings(texts, name: str = "predictions") -> list[str]:
    """A list of strings, which may be unscorable (see :func:`text_problem`), or a TypeError naming the bad item."""
    if texts is None:
        raise TypeError(f"{name} must be a list of strings, got None")
    if hasattr(texts, "tolist") and getattr(texts, "ndim", None) == 1:
        texts = texts.tolist()  # a 1-D numpy array or pandas Series of strings
    if isinstance(texts, str) or not isinstance(texts, Sequence):
        raise TypeError(f"{name} must be a list of strings, got {type(texts).__name__}")
    for index, text in enumerate(texts):
        if not isinstance(text, str):
            raise TypeError(f"{name}[{index}] must be a string, got {type(text).__name__}")
    return list(texts)


# why a text cannot be scored, as warnings group them
NO_LETTERS, NOT_TEXT, NOT_ENGLISH = "no letters", "a lone surrogate", "not English"


def unscorable(text: str) -> tuple[str, str] | None:
    """Why a string cannot be scored, as (reason, message): no letters, a lone surrogate, or clearly not English
    (:func:`language_problem`); None when it can be."""
    if not has_words(text):
        return NO_LETTERS, f"is empty or has no letters: {preview(text)}"
    if problem := not_unicode_text(text):
        return NOT_TEXT, problem
    if problem := language_problem(text):
        return NOT_ENGLISH, f"is not English ({problem}); the metrics score English text only: {preview(text)}"
    return None


def text_problem(text: str) -> str | None:
    """The message of :func:`unscorable`, or None."""
    found = unscorable(text)
    return found[1] if found else None


def rows_by_reason(reasons: dict[str, list[int]], unit: str = "row", limit: int = 20) -> str:
    """Unscorable rows grouped by why: "not English at rows 2, 4; no letters at row 7" (each list cut at ``limit``)."""
    parts = []
    for reason, rows in reasons.items():
        shown = ", ".join(map(str, rows[:limit])) + (f" and {len(rows) - limit} more" if len(rows) > limit else "")
        parts.append(f"{reason} at {unit}{'s' if len(rows) > 1 else ''} {shown}")
    return "; ".join(parts)


ON_INVALID = ("raise", "nan")


def check_on_invalid(on_invalid) -> str:
    if on_invalid not in ON_INVALID:
        raise ValueError(f"on_invalid must be one of {ON_INVALID}, got {on_invalid!r}")
    return on_invalid


def not_unicode_text(text: str) -> str | None:
    """Why ``text`` cannot be encoded as UTF-8 (a lone surrogate, e.g. from a JSON escape of half an emoji), or None."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        return f"holds {text[error.start]!r} at position {error.start}, a lone surrogate rather than a character (text cut inside an emoji?)"
    return None


def positive_int(text: str) -> int:
    """argparse type of counts such as ``--num-threads``: a bad value is a usage error before anything loads."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expects a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expects a positive integer, got {value}")
    return value


def check_batch_size(batch_size) -> int:
    """``batch_size`` as an int: any integer type (numpy's too, through operator.index), never a bool,
    which is an int subclass, and True is not a batch size anyone means."""
    try:
        if isinstance(batch_size, bool):
            raise TypeError
        batch_size = operator.index(batch_size)
    except TypeError:
        raise TypeError(f"batch_size must be a positive integer, got {batch_size!r}") from None
    if batch_size < 1:
        raise ValueError(f"batch_size must be positive, got {batch_size}")
    return batch_size


def check_progress_bar(progress_bar) -> bool:
    # a truthy string such as "no" would turn the bar on
    if not isinstance(progress_bar, bool):
        raise TypeError(f"progress_bar must be True or False, got {progress_bar!r}")
    return progress_bar


def check_same_length(**columns: Sequence) -> None:
    lengths = {name: len(values) for name, values in columns.items()}
    if len(set(lengths.values())) > 1:
        raise ValueError(f"inputs must have the same length, got {lengths}")


def with_nan_at(rows: Sequence[int], total: int, scores: Sequence[float]) -> list[float]:
    """``scores`` of the scorable rows spread over ``total`` rows, NaN at ``rows``."""
    scored = iter(scores)
    skipped = set(rows)
    return [math.nan if i in skipped else next(scored) for i in range(total)]
