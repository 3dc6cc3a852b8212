"""Run the test matrix that tox.ini describes, with plain virtual environments.

    python3 scripts/matrix.py                 # every cell in tox.ini's [matrix] cells
    python3 scripts/matrix.py main py313-pg18  # some of them
    python3 scripts/matrix.py --list          # what each cell is

Each cell gets a virtual environment under .tox/matrix/ (cells with the same
interpreter and SQLAlchemy share one) and runs the README's test command,
``bash scripts/test.sh``, once per pytest line of its tox ``commands``, with
the cell's ``setenv`` and nothing else of the caller's ``VENTURI_*``
variables.  Afterwards the interpreter, SQLAlchemy and PostgreSQL versions the
cell really used are checked against what it declares.

What is missing is installed where that is possible: a Python interpreter via
pyenv, PostgreSQL 15's server via apt-get (as root, with CI=true or
VENTURI_MATRIX_INSTALL=1).  A cell whose interpreter cannot be had at all is
skipped with a loud message; every other setup problem fails the cell.  The
last line is the totals, e.g. ``matrix: 1093 passed, 0 failed, 4 skipped``;
the exit status is non-zero if any cell failed.

Standard library only: it runs on the machine's own python3.
"""

from __future__ import annotations

import configparser
import glob
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TOX_INI = ROOT / "tox.ini"
VENV_ROOT = ROOT / ".tox" / "matrix"
SUMMARY = re.compile(r"(\d+) (passed|failed|skipped|errors?|xfailed|xpassed)\b")
PG_HEADER = re.compile(r"^postgresql: .*?PostgreSQL (\S+) from (.+?) \(")
DEBIAN_PG = re.compile(r"^/usr/lib/postgresql/(\d+)/bin/?$")


@dataclass
class Cell:
    name: str
    description: str
    python: str  # "3.11"
    deps: list[str]
    setenv: dict[str, str]
    runs: list[list[str]]  # pytest arguments, one list per pytest command

    @property
    def venv(self) -> Path:
        key = "-".join([f"py{self.python}", *(re.sub(r"[^A-Za-z0-9.]+", "_", d) for d in self.deps)])
        return VENV_ROOT / key


@dataclass
class Result:
    cell: Cell
    status: str = "not run"  # ok, FAILED, SKIPPED
    detail: str = ""
    seconds: float = 0.0
    counts: dict[str, int] = field(default_factory=dict)
    versions: str = ""


def say(text: str = "") -> None:
    print(text, flush=True)


def banner(text: str) -> None:
    say()
    say("=" * 78)
    say(text)
    say("=" * 78)


# -- reading tox.ini ----------------------------------------------------------------------------

def _lines(value: str) -> list[str]:
    return [line.strip() for line in value.splitlines() if line.strip()]


def _setenv(value: str) -> dict[str, str]:
    env = {}
    for line in _lines(value):
        key, _, val = line.partition("=")
        env[key.strip()] = val.strip()
    return env


def read_cells(path: Path = TOX_INI) -> list[Cell]:
    """The cells named in ``[matrix] cells``, as their tox environments declare them."""
    ini = configparser.ConfigParser(interpolation=None)
    ini.read(path, encoding="utf-8")
    base = ini["testenv"]
    cells = []
    for name in (n.strip() for n in ini["matrix"]["cells"].split(",")):
        section = ini[f"testenv:{name}"]

        def get(key: str, section: configparser.SectionProxy = section) -> str:
            return section.get(key, base.get(key, ""))

        basepython = get("basepython")
        match = re.fullmatch(r"python(3\.\d+)", basepython)
        if not match:
            raise SystemExit(f"tox.ini [testenv:{name}]: basepython must be like python3.11, not {basepython!r}")
        runs = []
        for line in _lines(get("commands")):
            argv = [a for a in shlex.split(line) if a != "{posargs}"]
            if not argv or argv[0] != "pytest":
                raise SystemExit(f"tox.ini [testenv:{name}]: only pytest commands are supported: {line!r}")
            runs.append(argv[1:])
        cells.append(Cell(name, get("description"), match.group(1), _lines(get("deps")), _setenv(get("setenv")),
                          runs))
    return cells


# -- setting a cell up --------------------------------------------------------------------------

def may_install() -> bool:
    return os.geteuid() == 0 and (os.environ.get("CI") == "true" or os.environ.get("VENTURI_MATRIX_INSTALL") == "1")


def _python_version(exe: str) -> str | None:
    try:
        out = subprocess.run([exe, "-c", "import sys; print('%d.%d.%d' % sys.version_info[:3])"],
                             capture_output=True, text=True, timeout=30, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return out.strip()


def _pyenv_root() -> Path | None:
    pyenv = shutil.which("pyenv") or (str(Path.home() / ".pyenv/bin/pyenv")
                                      if (Path.home() / ".pyenv/bin/pyenv").exists() else None)
    if pyenv is None:
        return None
    try:
        return Path(subprocess.run([pyenv, "root"], capture_output=True, text=True, timeout=30,
                                   check=True).stdout.strip())
    except (OSError, subprocess.SubprocessError):
        return None


def _candidates(minor: str) -> list[str]:
    found = []
    root = _pyenv_root()
    if root is not None:
        versions = glob.glob(str(root / "versions" / f"{minor}.*" / "bin" / f"python{minor}"))
        found += sorted(versions, key=lambda p: [int(n) for n in re.findall(r"\d+", Path(p).parents[1].name)],
                        reverse=True)
    for name in (f"python{minor}", "python3"):
        on_path = shutil.which(name)
        if on_path:
            found.append(on_path)
    return found


def _can_make_venvs(exe: str, minor: str) -> bool:
    """Debian's interpreters lack ``ensurepip`` (so ``-m venv`` fails) until python3.X-venv is installed."""
    def check() -> bool:
        return subprocess.run([exe, "-c", "import ensurepip, venv"], capture_output=True, check=False).returncode == 0
    if check():
        return True
    if may_install() and shutil.which("apt-get"):
        say(f"matrix: {exe} cannot create virtual environments; installing python{minor}-venv")
        subprocess.run(["apt-get", "install", "-y", "-q", f"python{minor}-venv"], check=False)
    return check()


def find_python(minor: str) -> tuple[str | None, str]:
    """An interpreter for Python ``minor`` (e.g. "3.10"), installing one if it can; (path, how)."""
    for exe in _candidates(minor):
        version = _python_version(exe)
        if version and version.startswith(f"{minor}.") and _can_make_venvs(exe, minor):
            return exe, ""
    tried = []
    if _pyenv_root() is not None:
        pyenv = shutil.which("pyenv") or str(Path.home() / ".pyenv/bin/pyenv")
        say(f"matrix: no Python {minor} found; trying `pyenv install {minor}`")
        try:
            done = subprocess.run([pyenv, "install", "--skip-existing", minor], timeout=600, check=False)
            tried.append(f"pyenv install {minor} exited {done.returncode}")
        except (OSError, subprocess.SubprocessError) as err:
            tried.append(f"pyenv install {minor}: {err}")
    if may_install() and shutil.which("apt-get"):
        say(f"matrix: trying `apt-get install python{minor}`")
        done = subprocess.run(["apt-get", "install", "-y", "-q", f"python{minor}", f"python{minor}-venv"],
                              check=False)
        tried.append(f"apt-get install python{minor} exited {done.returncode}")
    for exe in _candidates(minor):
        version = _python_version(exe)
        if version and version.startswith(f"{minor}.") and _can_make_venvs(exe, minor):
            return exe, "; ".join(tried)
    return None, "; ".join(tried) or "no pyenv, and installing system packages is off (set CI=true as root)"


def ensure_os_postgres(bin_dir: str) -> str | None:
    """None if ``bin_dir`` holds a server (installing Debian's package if allowed), else the problem."""
    if (Path(bin_dir) / "initdb").exists() and (Path(bin_dir) / "pg_ctl").exists():
        return None
    match = DEBIAN_PG.match(bin_dir)
    if match and may_install() and shutil.which("apt-get"):
        package = f"postgresql-{match.group(1)}"
        say(f"matrix: {bin_dir} is missing; installing {package} with apt-get")
        subprocess.run(["apt-get", "update", "-q"], check=False)
        subprocess.run(["apt-get", "install", "-y", "-q", "--no-install-recommends", package],
                       env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"}, check=False)
        if (Path(bin_dir) / "initdb").exists():
            return None
    return (f"no PostgreSQL server in {bin_dir}" +
            ("" if may_install() else " (as root with CI=true this script installs Debian's package)"))


# -- running a cell -----------------------------------------------------------------------------

def cell_env(cell: Cell, python: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("VENTURI_")}
    env.update(cell.setenv)
    env["VENV"] = str(cell.venv)
    env["PYTHON"] = python
    env["VENTURI_PINS"] = " ".join(cell.deps)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def run_streamed(argv: list[str], env: dict[str, str]) -> tuple[int, list[str]]:
    """Run ``argv``, echoing its output as it comes; (exit status, output lines)."""
    lines: list[str] = []
    with subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          stdin=subprocess.DEVNULL, text=True, bufsize=1) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            sys.stdout.write(line)
            sys.stdout.flush()
            lines.append(line.rstrip("\n"))
    return proc.returncode, lines


def pytest_counts(lines: list[str]) -> dict[str, int] | None:
    """The counts on pytest's closing summary line (``12 passed, 1 skipped in 3.4s``), if any."""
    for line in reversed(lines):
        if re.search(r"\bin \d+(\.\d+)?s\b", line) and SUMMARY.search(line):
            counts: dict[str, int] = {}
            for number, what in SUMMARY.findall(line):
                key = "errors" if what.startswith("error") else what
                counts[key] = counts.get(key, 0) + int(number)
            return counts
    return None


def check_versions(cell: Cell, result: Result, pg_seen: list[str]) -> str | None:
    """Compare the interpreter, SQLAlchemy and PostgreSQL the cell used with what it declares."""
    probe = ("import sys, sqlalchemy\n"
             "from packaging.specifiers import SpecifierSet\n"
             "print('%d.%d.%d' % sys.version_info[:3], sqlalchemy.__version__)\n"
             "for spec in sys.argv[1:]:\n"
             "    name, _, rest = spec.partition('sqlalchemy')\n"
             "    if not name and rest and sqlalchemy.__version__ not in SpecifierSet(rest):\n"
             "        sys.exit('SQLAlchemy %s does not satisfy %s' % (sqlalchemy.__version__, spec))\n")
    done = subprocess.run([str(cell.venv / "bin" / "python"), "-c", probe, *cell.deps],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        return (done.stderr.strip() or done.stdout.strip()).splitlines()[-1]
    py, sqla = done.stdout.split()
    pg = ", ".join(sorted(set(pg_seen))) or "?"
    result.versions = f"Python {py}, SQLAlchemy {sqla}, PostgreSQL {pg}"
    if not py.startswith(f"{cell.python}."):
        return f"the venv runs Python {py}, not {cell.python}"
    expected = cell.setenv.get("VENTURI_EXPECT_PG_MAJOR")
    if expected and any(not v.startswith(f"{expected}.") for v in pg_seen):
        return f"PostgreSQL {pg} was used, not {expected}"
    if expected and not pg_seen:
        return "pytest did not report which PostgreSQL it used"
    return None


def run_cell(cell: Cell) -> Result:
    result = Result(cell)
    banner(f"matrix cell {cell.name}: {cell.description}")
    started = time.monotonic()
    try:
        python, how = find_python(cell.python)
        if python is None:
            result.status, result.detail = "SKIPPED", f"no Python {cell.python} on this machine ({how})"
            say(f"!!! matrix: SKIPPING cell {cell.name}: {result.detail}")
            return result
        bin_dir = cell.setenv.get("VENTURI_PG_BIN")
        problem = ensure_os_postgres(bin_dir) if bin_dir else None
        if problem:
            result.status, result.detail = "FAILED", problem
            say(f"!!! matrix: cell {cell.name} cannot be set up: {problem}")
            return result
        env = cell_env(cell, python)
        totals: dict[str, int] = {}
        pg_seen: list[str] = []
        for args in cell.runs:
            say(f"matrix: {cell.name}: bash scripts/test.sh {shlex.join(args)}   (venv {cell.venv.relative_to(ROOT)})")
            code, lines = run_streamed(["bash", "scripts/test.sh", *args], env)
            pg_seen += [m.group(1) for m in map(PG_HEADER.match, lines) if m]
            counts = pytest_counts(lines)
            for key, value in (counts or {}).items():
                totals[key] = totals.get(key, 0) + value
            if code != 0 or counts is None or not counts.get("passed"):
                result.counts = totals
                result.status = "FAILED"
                result.detail = (f"pytest exited {code}" if code != 0 else "pytest ran no test") + \
                    ("" if counts is not None else " (no pytest summary line)")
                return result
        result.counts = totals
        problem = check_versions(cell, result, pg_seen)
        result.status, result.detail = ("FAILED", problem) if problem else ("ok", "")
        return result
    finally:
        result.seconds = time.monotonic() - started


# -- the whole matrix ---------------------------------------------------------------------------

def minutes(seconds: float) -> str:
    return f"{int(seconds // 60)}m{seconds % 60:04.1f}s"


def report(results: list[Result], seconds: float) -> int:
    banner("matrix summary")
    for r in results:
        counts = ", ".join(f"{v} {k}" for k, v in r.counts.items()) or "-"
        say(f"{r.cell.name:<14} {r.status:<8} {minutes(r.seconds):>9}  {counts}")
        say(f"{'':<14} {r.versions or r.cell.description}")
        if r.detail:
            say(f"{'':<14} {r.detail}")
    failed = [r.cell.name for r in results if r.status == "FAILED"]
    skipped = [r.cell.name for r in results if r.status == "SKIPPED"]
    say(f"total {minutes(seconds)}; cells failed: {', '.join(failed) or 'none'}; "
        f"cells skipped: {', '.join(skipped) or 'none'}")
    total = {k: sum(r.counts.get(k, 0) for r in results) for k in ("passed", "failed", "errors", "skipped")}
    say(f"matrix: {total['passed']} passed, {total['failed'] + total['errors']} failed, "
        f"{total['skipped']} skipped")
    return 1 if failed or not total["passed"] else 0


def main(argv: list[str]) -> int:
    cells = read_cells()
    if argv[:1] == ["--list"]:
        for c in cells:
            say(f"{c.name:<14} Python {c.python}  {' '.join(c.deps) or '-'}  "
                f"{' '.join(f'{k}={v}' for k, v in c.setenv.items())}")
            for args in c.runs:
                say(f"{'':<14} bash scripts/test.sh {shlex.join(args)}")
        return 0
    unknown = set(argv) - {c.name for c in cells}
    if unknown:
        say(f"matrix: unknown cells {sorted(unknown)}; known: {[c.name for c in cells]}")
        return 2
    chosen = [c for c in cells if not argv or c.name in argv]
    started = time.monotonic()
    results = [run_cell(c) for c in chosen]
    return report(results, time.monotonic() - started)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
