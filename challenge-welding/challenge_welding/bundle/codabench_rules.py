"""What Codabench itself refuses in a v2 bundle, with the message Codabench gives.

Read from codalab/codabench (src/apps/competitions/tasks.py unpack_competition,
competitions/unpackers/{base_unpacker,v2,utils}.py, api/serializers/{competitions,
leaderboards,tasks}.py, the models' max_length, api/fields.py NamedBase64ImageField on
drf-extra-fields 3.7.0, settings DEFAULT_USER_QUOTA, api/views/datasets.py). The
unpacker stops at the first problem; these functions list them all. Each problem is one
line: what is wrong in our words, then ``[Codabench: "<its message>"]``, the text the
upload page shows for it. Serializer errors are shown by Codabench as
``<field>: <message>`` (tasks.py _get_error_string).
"""

from __future__ import annotations

import datetime as dt
import re

from dateutil import parser

# Model field lengths (CharField max_length; the serializer says "Ensure this field has
# no more than N characters.").
MAX_COMPETITION_TITLE = 256       # competitions.Competition.title
MAX_DOCKER_IMAGE = 128            # competitions.Competition.docker_image
MAX_EMAIL = 256                   # competitions.Competition.contact_email (EmailField)
MAX_PHASE_NAME = 256              # competitions.Phase.name
MAX_PAGE_TITLE = 255              # competitions.Page.title
MAX_TASK_NAME = 256               # tasks.Task.name
MAX_SOLUTION_NAME = 256           # tasks.Solution.name
MAX_LEADERBOARD_TITLE = 64        # leaderboards.Leaderboard.title
MAX_LEADERBOARD_KEY = 36          # leaderboards.Leaderboard.key
MAX_COLUMN_TITLE = 36             # leaderboards.Column.title
MAX_COLUMN_KEY = 36               # leaderboards.Column.key
SUBMISSION_RULES = ("Add", "Add_And_Delete", "Add_And_Delete_Multiple", "Force_Last",
                    "Force_Latest_Multiple", "Force_Best")
COMPUTATIONS = ("avg", "sum", "min", "max")
SORTINGS = ("desc", "asc")
LOGO_TYPES = ("jpeg", "png", "gif", "webp")   # drf-extra-fields Base64ImageField.ALLOWED_TYPES
# settings.DEFAULT_USER_QUOTA = 15 (GB); utils.data.gb_to_bytes: decimal gigabytes.
DEFAULT_QUOTA_BYTES = 15 * 1000**3
# competitions/tasks.py: the default queue's limit, whatever the phase asks for.
DEFAULT_QUEUE_LIMIT_S = 600

_EMAIL = re.compile(r"^[A-Za-z0-9!#$%&'*+/=?^_`{|}~.-]+@(localhost|([A-Za-z0-9-]+\.)+[A-Za-z]{2,63})$")


def cb(ours: str, theirs: str) -> str:
    """One problem line: our explanation, then Codabench's own message."""
    return f'{ours} [Codabench: "{theirs}"]'


def too_long(limit: int) -> str:
    return f"Ensure this field has no more than {limit} characters."


def check_length(where: str, field: str, value, limit: int, problems: list[str],
                 nested_in: str = "") -> None:
    """``nested_in``: the list field Codabench names first ("phases", "pages")."""
    if value is not None and len(str(value)) > limit:
        path = f"{nested_in}: " if nested_in else ""
        problems.append(cb(f"{where}: {field} is {len(str(value))} characters, at most {limit}",
                           f"{path}{field}: {too_long(limit)}"))


def logo_type(data: bytes) -> str | None:
    """The logo's format as Codabench finds it (imghdr, then Pillow), or None.

    Only the four allowed formats are told apart; anything else is None.
    """
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "png"
    if data.startswith(b"\xff\xd8\xff"):
        return "jpeg"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "gif"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "webp"
    return None


_OTHER_IMAGES = (b"BM", b"II*\x00", b"MM\x00*", b"\x00\x00\x01\x00", b"P1", b"P2", b"P3",
                 b"P4", b"P5", b"P6")


def logo_problem(name: str, data: bytes) -> str | None:
    """None when Codabench takes ``data`` as a logo; else the problem line."""
    if logo_type(data):
        return None
    if data.startswith(_OTHER_IMAGES):
        # imghdr/Pillow know it (BMP, TIFF, ICO, PNM) but it is not an allowed type
        return cb(f"image '{name}': an image type Codabench does not take as a logo "
                  f"(only {', '.join(LOGO_TYPES)})",
                  "logo: The type of the image couldn't be determined.")
    return cb(f"image '{name}': not a JPEG, PNG, GIF or WebP file",
              "logo: Please upload a valid image.")


def valid_email(text: str) -> bool:
    """Django's EmailValidator in substance: one @, a dotted domain with a letter TLD."""
    return len(text) <= MAX_EMAIL and bool(_EMAIL.match(text)) and ".." not in text


def parse_date(value) -> dt.datetime | None:
    """A phase date as Codabench reads it (unpackers/utils.get_datetime: dateutil).

    Raises ValueError when dateutil cannot parse it; None for an empty value.
    """
    if value in (None, ""):
        return None
    if isinstance(value, dt.datetime):
        return value.replace(tzinfo=None)
    if isinstance(value, dt.date):
        return dt.datetime.combine(value, dt.time())
    try:
        return parser.parse(str(value)).replace(tzinfo=None)
    except (ValueError, OverflowError) as exc:
        raise ValueError(str(exc)) from None


def check_competition(comp: dict, problems: list[str]) -> None:
    """Competition-level serializer rules: title, docker_image, contact_email."""
    title = comp.get("title")
    if title in (None, ""):
        problems.append(cb("competition.yaml: required key 'title' is missing",
                           "title: This field may not be null."))
    else:
        check_length("competition.yaml", "title", title, MAX_COMPETITION_TITLE, problems)
    check_length("competition.yaml", "docker_image", comp.get("docker_image"), MAX_DOCKER_IMAGE,
                 problems)
    email = comp.get("contact_email")
    if email not in (None, "") and not valid_email(str(email)):
        problems.append(cb(f"competition.yaml: contact_email {email!r} is not an e-mail address",
                           "contact_email: Enter a valid email address."))


def check_auto_migration(phases: list[dict], problems: list[str]) -> None:
    """CompetitionSerializer.validate_phases (phases sorted by index, as the unpacker does)."""
    if not phases:
        return
    if len(phases) == 1 and phases[0].get("auto_migrate_to_this_phase"):
        problems.append(cb("phases: auto_migrate_to_this_phase in a single-phase competition",
                           "phases: You cannot auto migrate in a competition with one phase"))
    elif phases[0].get("auto_migrate_to_this_phase") is True:
        problems.append(cb(f"phase '{phases[0].get('name')}': auto_migrate_to_this_phase on the "
                           "first phase",
                           "phases: You cannot auto migrate to the first phase of a competition"))


def check_leaderboard(board: dict, where: str, problems: list[str]) -> list:
    """LeaderboardSerializer + ColumnSerializer rules; returns the column indexes."""
    check_length(where, "title", board.get("title"), MAX_LEADERBOARD_TITLE, problems)
    check_length(where, "key", board.get("key"), MAX_LEADERBOARD_KEY, problems)
    for field in ("title", "key"):
        if board.get(field) in (None, ""):
            problems.append(cb(f"{where}: needs a {field}", f"{field}: This field is required."))
    rule = board.get("submission_rule", "Add")
    if rule not in SUBMISSION_RULES:
        problems.append(cb(f"{where}: submission_rule {rule!r} is not one of "
                           f"{', '.join(SUBMISSION_RULES)}",
                           f'submission_rule: "{rule}" is not a valid choice.'))
    columns = board.get("columns")
    if not isinstance(columns, list) or not columns:
        problems.append(cb(f"{where}: needs at least one column",
                           "columns: Leaderboards require at least 1 column"))
        return []
    columns = [c for c in columns if isinstance(c, dict)]
    indexes = [c.get("index") for c in columns]
    keys = [c.get("key") for c in columns]
    if len(set(map(str, indexes))) != len(indexes):
        problems.append(cb(f"{where}: column indexes are not unique",
                           "columns: Columns must have unique indexes!"))
    if len(set(map(str, keys))) != len(keys):
        problems.append(cb(f"{where}: column keys are not unique",
                           "columns: Columns must have unique keys!"))
    for c, col in enumerate(columns):
        cwhere = f"{where} column '{col.get('key') or c}'"
        for field in ("title", "key", "index"):
            if col.get(field) in (None, ""):
                problems.append(cb(f"{cwhere}: needs a key, a title and an index",
                                   f"columns: {field}: This field is required."))
        for field, limit in (("key", MAX_COLUMN_KEY), ("title", MAX_COLUMN_TITLE)):
            value = col.get(field)
            if value is not None and len(str(value)) > limit:
                problems.append(cb(f"{cwhere}: {field} '{value}' is {len(str(value))} "
                                   f"characters, at most {limit}",
                                   f"columns: {field}: {too_long(limit)}"))
        sorting = col.get("sorting", "desc")
        if sorting not in SORTINGS:
            problems.append(cb(f"{cwhere}: sorting must be asc or desc",
                               f'columns: sorting: "{sorting}" is not a valid choice.'))
        _check_computation(col, cwhere, indexes, problems)
    return indexes


def _check_computation(col: dict, where: str, indexes: list, problems: list[str]) -> None:
    comp, refs = col.get("computation"), col.get("computation_indexes")
    if comp is not None and comp not in COMPUTATIONS:
        problems.append(cb(f"{where}: computation must be one of {', '.join(COMPUTATIONS)}",
                           f'columns: computation: "{comp}" is not a valid choice.'))
    if comp and not refs:
        problems.append(cb(f"{where}: a computed column needs computation_indexes",
                           "columns: Column with computation must have at least 1 column "
                           "selected for the computation to act upon"))
    if refs and not comp:
        problems.append(cb(f"{where}: computation_indexes without a computation",
                           "columns: Cannot add computation columns without a computation "
                           "function set"))
    if not refs:
        return
    parts = [str(r).strip() for r in (refs if isinstance(refs, list) else str(refs).split(","))]
    if str(col.get("index")) in parts:
        problems.append(cb(f"{where}: computed from itself",
                           f"columns: Column with index {col.get('index')} referencing itself. "
                           "Cannot self-reference, must be other columns."))
    known = {str(i) for i in indexes}
    for part in parts:
        if not part.lstrip("-").isdigit():
            problems.append(cb(f"{where}: computation index {part!r} is not an integer",
                               f"columns: Bad value for index, should be an integer but "
                               f"received: {part}."))
        elif part not in known:
            problems.append(cb(f"{where}: computation index {part} is not a column index",
                               f"columns: Column index {part} does not exist in available "
                               f"indexes {indexes}"))


def phase_name(phase: dict) -> str:
    return str(phase.get("name", phase.get("index")))


def check_phase_order(phases: list[dict], dates: list[tuple], problems: list[str]) -> None:
    """BaseUnpacker._validate_phase_ordering over phases sorted by index.

    ``dates``: (start, end) per phase, None where missing or unparsable.
    """
    for i in range(1, len(phases)):
        prev, cur = phases[i - 1], phases[i]
        (_, prev_end), (start, _) = dates[i - 1], dates[i]
        if prev.get("end") in (None, ""):
            problems.append(cb(f"phase '{phase_name(prev)}': needs an end, phase "
                               f"'{phase_name(cur)}' follows it",
                               f"Phase: {phase_name(prev)} must have an end time because it has "
                               "a phase after it."))
        elif start is None or prev_end is None:
            continue
        elif start < prev_end:
            problems.append(cb(f"phase '{phase_name(cur)}': starts ({start}) before phase "
                               f"'{phase_name(prev)}' has ended ({prev_end}); phases must be "
                               "sequential",
                               f"Phases must be sequential. Phase: {phase_name(cur)}starts "
                               f"before Phase: {phase_name(prev)} has ended"))
        elif start == prev_end:
            problems.append(cb(f"phase '{phase_name(cur)}': starts when phase "
                               f"'{phase_name(prev)}' ends ({start}); phases must be sequential "
                               "(it must start strictly after)",
                               f"Phases dates conflict. Phase: {phase_name(cur)} should start "
                               f"after Phase: {phase_name(prev)} has ended"))


def quota_problems(upload_bytes: int, stored_bytes: int, quota_bytes: int) -> list[str]:
    """The upload against a user's quota (api/views/datasets.py), and what unpacking adds.

    The bundle zip is refused at upload when it alone exceeds the quota (an account
    with nothing stored yet). The unpacker then stores every program, data set, kit and
    solution again as datasets of the same user, which count in the same quota.
    """
    gb = quota_bytes / 1000**3
    if upload_bytes > quota_bytes:
        return [cb(f"the bundle zip is {upload_bytes / 1000**3:.2f} GB, over the {gb:g} GB "
                   "upload quota of a Codabench account (upload the large data as datasets "
                   "and put their keys in competition.yaml)",
                   "data_file: Insufficient space. Your available space is ... The file size "
                   "is ...")]
    if upload_bytes + stored_bytes > quota_bytes:
        return [cb(f"the bundle zip ({upload_bytes / 1000**3:.2f} GB) plus the datasets the "
                   f"unpacker stores from it ({stored_bytes / 1000**3:.2f} GB) exceed the "
                   f"{gb:g} GB quota of a Codabench account: the account is full after the "
                   "upload, every later upload and submission is refused",
                   "Insufficient space. Your available space is ...")]
    return []
