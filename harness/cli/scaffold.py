"""``pg-job-chaos new-design NAME [--out DIR]``: a hosted design file for the user's own worker.

It writes ``NAME.py`` (dashes become underscores), the template ``new_design.py.txt`` beside this
module (package data) filled in: a :class:`~workers.hosted.HostedDesign` subclass with the six
calls, commented, that runs fault-free as written (a small queue of its own), for the user to
replace its SQL and loop with their worker's. It never overwrites a file (exit 2).
"""

from __future__ import annotations

import argparse
import importlib.util
import keyword
import string
from pathlib import Path

from ...core.errors import EXIT_HELD, UsageError

COMMAND = "new-design"
TEMPLATE = Path(__file__).with_name("new_design.py.txt")


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser(COMMAND, help="write a hosted design file for your own worker, to fill in",
                       description="Write NAME.py: a commented hosted design (workers/hosted/protocol.py) "
                                   "for your own worker, that runs as it is; then run it with "
                                   "pg-job-chaos search --design NAME.py:ClassName.")
    p.add_argument("name", metavar="NAME", help="the module's name, e.g. my_queue (writes my_queue.py)")
    p.add_argument("--out", default=".", metavar="DIR", help="the directory to write it in (default: here)")
    p.set_defaults(command=run, verbose=0, quiet=True)
    return p


def names(name: str) -> dict[str, str]:
    """The template's fields for *name*: module, class_name, name (the design's), table."""
    module = name.removesuffix(".py").replace("-", "_")
    if not module.isidentifier() or keyword.iskeyword(module) or not module.isascii():
        raise UsageError(f"{COMMAND} {name!r}: the name must be a Python module name, e.g. my_queue")
    class_name = "".join(part[:1].upper() + part[1:] for part in module.split("_")) or "Design"
    if not class_name[0].isalpha():
        class_name = "Design" + class_name
    return {"module": module, "class_name": class_name, "name": module.replace("_", "-").strip("-"),
            "table": f"{module.lower().strip('_')}_jobs"}


def render(name: str) -> str:
    """The design file's text for *name*."""
    return string.Template(TEMPLATE.read_text()).substitute(names(name))


def run(args, progress) -> int:
    fields = names(args.name)
    folder = Path(args.out).expanduser()
    path = folder / f"{fields['module']}.py"
    if path.exists():
        raise UsageError(f"{path} exists; not overwriting it (remove it, or choose another NAME or --out)")
    if importlib.util.find_spec(fields["module"]) is not None:
        raise UsageError(f"{COMMAND} {args.name!r}: a module {fields['module']!r} is already importable; "
                         f"{fields['module']}.py would shadow it -- choose another NAME")
    text = render(args.name)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with open(path, "x") as f:  # "x": never overwrite, not even a file made since the check
            f.write(text)
    except FileExistsError:
        raise UsageError(f"{path} exists; not overwriting it") from None
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror or exc}") from None
    print(f"wrote {path}: class {fields['class_name']}; fill in your worker's SQL, then run\n"
          f"  pg-job-chaos search --design {path}:{fields['class_name']} --examples 1")
    return EXIT_HELD
