"""What a user reads in the built collection only points at what the collection ships.

    python3 tests/artifact/links.py TARBALL

Reads the tarball that ansible-galaxy built (standard library only) and fails, listing every problem, on:
  - a dead relative link in any shipped Markdown file: its target (a file or a folder) is not in the tarball, or
    lies outside the collection, or its #anchor is no heading of the target Markdown file (GitHub's anchors);
  - ansible-doc text that names a file the tarball lacks: the DOCUMENTATION, EXAMPLES and RETURN strings of
    plugins/*/*.py, the filters' and tests' YAML docs (plugins/*/*.yml) and the roles' meta/argument_specs.yml
    (`ansible-doc -t role`). A path counts when it starts with a top-level name of the source repository
    (docs/dev/x.md, tests/..., molecule/..., scripts/...): galaxy.yml's build_ignore keeps some of those out.
Links inside code (fenced blocks, `spans`) are not links and are skipped; so are URLs with a scheme.
"""

from __future__ import annotations

import ast
import posixpath
import re
import sys
import tarfile
import unicodedata
from urllib.parse import unquote

# The source repository's top-level names: a path in doc text starting with one of them means a file of the
# collection (or of its repository), which must then be in the tarball.
# (Not meta: a role's meta/argument_specs.yml is named that way too, and the collection's meta/ always ships.)
TOP_LEVEL = ("changelogs", "collections", "docs", "inventories", "molecule", "playbooks", "plugins", "profiles",
             "requirements", "roles", "scripts", "tests")
DOC_STRINGS = ("DOCUMENTATION", "EXAMPLES", "RETURN")

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")
INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*(<[^>]*>|[^)\s]+)(?:\s+\"[^\"]*\"|\s+'[^']*')?\s*\)")
REF_DEF = re.compile(r"^ {0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)")
HTML_ATTR = re.compile(r"""\b(?:href|src)\s*=\s*["']([^"']+)["']""", re.I)
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
HTML_ANCHOR = re.compile(r"""<a\s+[^>]*\b(?:name|id)\s*=\s*["']([^"']+)["']""", re.I)
PATH = re.compile(r"(?<![\w./~$-])((?:%s)(?:/[\w.*-]+)+/?)" % "|".join(TOP_LEVEL))


def prose_lines(text):
    """(line number, line) for each line outside fenced code blocks, with code spans blanked."""
    fence = None
    for no, line in enumerate(text.splitlines(), 1):
        m = FENCE.match(line)
        if fence is None and m:
            fence = m.group(1)
            continue
        if fence is not None:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) and not line.strip()[len(m.group(1)):]:
                fence = None
            continue
        yield no, CODE_SPAN.sub(lambda s: " " * len(s.group(0)), line)


def slug(heading):
    """GitHub's anchor for a heading: its text without markup, lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text only
    text = re.sub(r"<[^>]+>", "", text).replace("`", "").lower()
    kept = "".join(c for c in text if c in " -_" or unicodedata.category(c)[0] in "LNM")
    return kept.replace(" ", "-")


def anchors(text):
    found, seen = set(), {}
    for dummy, line in prose_lines(text):
        found.update(HTML_ANCHOR.findall(line))
    for line in _heading_lines(text):
        base = slug(line)
        n = seen.get(base, 0)
        seen[base] = n + 1
        found.add(base if n == 0 else "%s-%d" % (base, n))
    return found


def _heading_lines(text):
    fence = None
    for line in text.splitlines():
        m = FENCE.match(line)
        if fence is None and m:
            fence = m.group(1)
        elif fence is not None:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence):
                fence = None
        else:
            h = HEADING.match(line)
            if h:
                yield h.group(2)


def link_targets(text):
    for no, line in prose_lines(text):
        for pattern in (INLINE_LINK, REF_DEF, HTML_ATTR):
            for m in pattern.finditer(line):
                yield no, m.group(1).strip("<>")


def doc_strings(name, source):
    """The ansible-doc strings of a plugin's source: top-level DOCUMENTATION/EXAMPLES/RETURN = "..."."""
    for node in ast.parse(source, name).body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            for target in node.targets:
                if isinstance(target, ast.Name) and target.id in DOC_STRINGS:
                    yield target.id, node.value.value


def main(tarball):
    with tarfile.open(tarball) as tar:
        files = {m.name: m for m in tar.getmembers() if m.isfile()}

        def read(name):
            return tar.extractfile(files[name]).read().decode("utf-8")

        dirs = {posixpath.dirname(n) for n in files}
        dirs |= {posixpath.dirname(d) for d in list(dirs)}
        for d in list(dirs):
            while d:
                dirs.add(d)
                d = posixpath.dirname(d)

        def shipped(path):
            path = path.rstrip("/")
            return path in files or path in dirs

        problems = []  # (file, what is wrong)
        markdown = sorted(n for n in files if n.endswith(".md"))
        anchor_cache = {}
        for name in markdown:
            for no, target in link_targets(read(name)):
                if SCHEME.match(target) or target.startswith("//"):
                    continue
                path, dummy, anchor = target.partition("#")
                path = unquote(path)
                if path.startswith("/"):
                    problems.append((name, "line %d: %s: an absolute path, not a link within the collection" % (no, target)))
                    continue
                resolved = posixpath.normpath(posixpath.join(posixpath.dirname(name), path)) if path else name
                if resolved == ".." or resolved.startswith("../"):
                    problems.append((name, "line %d: %s: outside the collection" % (no, target)))
                elif not shipped(resolved):
                    problems.append((name, "line %d: %s: %s is not in the tarball" % (no, target, resolved)))
                elif anchor and resolved.endswith(".md") and resolved in files:
                    if resolved not in anchor_cache:
                        anchor_cache[resolved] = anchors(read(resolved))
                    if unquote(anchor) not in anchor_cache[resolved]:
                        problems.append((name, "line %d: %s: no heading #%s in %s" % (no, target, anchor, resolved)))

        docs = []  # (file, which text, text) of every ansible-doc-visible text
        for name in sorted(files):
            parts = name.split("/")
            if len(parts) == 3 and parts[0] == "plugins" and parts[2].endswith(".py"):
                docs += [(name, var + ", ", text) for var, text in doc_strings(name, read(name))]
            elif len(parts) == 3 and parts[0] == "plugins" and parts[2].endswith((".yml", ".yaml")):
                docs.append((name, "", read(name)))
            elif len(parts) == 4 and parts[0] == "roles" and parts[2:] == ["meta", "argument_specs.yml"]:
                docs.append((name, "", read(name)))
        for name, which, text in docs:
            for no, line in enumerate(text.splitlines(), 1):
                for path in PATH.findall(line):
                    path = path.rstrip(".")
                    if "*" not in path and not shipped(path):
                        problems.append((name, "%sline %d: names %s, which is not in the tarball" % (which, no, path)))

    print("%s: %d Markdown files, %d ansible-doc texts read" % (tarball.rsplit("/", 1)[-1], len(markdown), len(docs)))
    if problems:
        print("%d dead links or doc references to files the collection does not ship:" % len(problems))
        print("\n".join("  %s: %s" % p for p in problems))
        for kind, test in (("Markdown", lambda n: n.endswith(".md")), ("other", lambda n: not n.endswith(".md"))):
            names = sorted({n for n, dummy in problems if test(n)})
            if names:
                print("%d %s files: %s" % (len(names), kind, " ".join(names)))
        return 1
    print("every relative link and every file named in ansible-doc text is in the tarball")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1]))
