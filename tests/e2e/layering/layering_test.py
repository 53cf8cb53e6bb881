#!/usr/bin/env python3
"""The layering rule (ctest label `layering`): formats/ includes neither lib/ nor kernels/; lib/
includes no kernels/ header and does not branch on FTX_HAVE_CUDA / FTX_HAVE_NCCL (those are defined
for kernels/ and what links it, not for lib/; lib/ reaches CUDA through its registries).

Inside lib/, its rooms stand in tiers (LIB_TIERS, lowest first): a file includes headers of its own
room and of rooms in lower tiers only, never of a room beside it or above it. A new room must be
placed in the table before it can include anything. And the CPU backend is reached through the
backend registry like the CUDA one: no file outside lib/cpu/ includes a lib/cpu/ header. The op seam
(lib/ops/) names the model's blocks (lib/model/blocks.h), never its config: no lib/ops/ file includes
lib/model/model_config.h.

And kernels/ holds no integer mirror of an enum of lib/ or formats/: it switches on the enum itself
(kernels may include lib/ headers), so a reordered or extended enum cannot silently change what a
kernel computes. An integer mirror has to cross from the enum to an integer somewhere, and an enum
class does not convert implicitly, so the check finds the crossing: a cast to an integer type
(static_cast, C-style or functional) of a name that lib/ or formats/ declares with an enum's type
(a variable, parameter, member or function, e.g. `static_cast<int>(act.nonlinearity())`).

Citations (--citations): whoever clones the repository can follow what its sources cite. Every
*.md a source file under formats/ lib/ cmd/ kernels/ tests/ scripts/ bench/ names exists in the
repository (its path from the root, or from docs/), with the heading a `#anchor` names; no source
names /work/shared or ../shared (outside the repository), or FasterTransformer's fact specs
(ft-format, ft-runtime), which are not in it; and a section mark follows the name of what it cites
("Higham §4.2"), never a bare "(§3.1)" or "spec §3.1". Web addresses are not files and are not
checked; tests/fixtures/, tests/fuzz/corpus/ and bench/results/ are data and records, not sources
(and this checker names what it forbids).

Usage: layering_test.py SOURCE_DIR               checks the tree, prints every violation, exits 1 if any
       layering_test.py --self-test              checks the checker on scratch trees with planted violations
       layering_test.py --citations SOURCE_DIR   checks the sources' citations
       layering_test.py --citations-self-test    checks that checker on planted bad citations
"""
import os
import re
import subprocess
import sys
import tempfile

INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]')
CUDA_MACRO = re.compile(r'\bFTX_HAVE_(CUDA|NCCL)\b')
SUFFIXES = ('.h', '.hh', '.hpp', '.cc', '.cpp', '.cu', '.cuh', '.inc')

# layer -> include prefixes it must not use
FORBIDDEN = {
    'formats': ('lib/', 'kernels/'),
    'lib': ('kernels/',),
}

# lib/'s rooms, lowest tier first. The number formats (dtype, FP8 E4M3) live below all of them, in
# formats/. decoding/ is below ops/ (the backend samples rows with decoding's arithmetic, and the
# decoder reaches the backend only as a decoding::LogitsDevice); quant/ is on top (it calibrates with
# the engine and writes through the converters).
LIB_TIERS = [
    ('util',),
    ('model', 'tokenizer'),
    ('decoding',),
    ('ops',),
    ('cpu', 'dist', 'gemm'),
    ('engine',),
    ('convert', 'eval', 'inspect', 'serve'),
    ('quant',),
]
TIER = {room: i for i, rooms in enumerate(LIB_TIERS) for room in rooms}


ENUM_DECL = re.compile(r'\benum\s+class\s+(\w+)')
INT_TYPE = r'(?:unsigned\s+|signed\s+)?(?:int|long|short|char|size_t|u?int(?:8|16|32|64)_t)'
# The operand of a cast: a name, reached through members and calls (a.b->c(), ops::x).
OPERAND = r'\s*((?:[\w:]+(?:\(\))?\s*(?:\.|->)\s*)*[\w:]+)(?:\(\))?\s*\)'
INT_CAST = re.compile(r'static_cast\s*<\s*' + INT_TYPE + r'\s*>\s*\(' + OPERAND + '|'
                      r'\(\s*' + INT_TYPE + r'\s*\)\s*\(?' + r'((?:[\w:]+(?:\(\))?\s*(?:\.|->)\s*)*[\w:]+)' + '|'
                      r'\b' + INT_TYPE + r'\s*\(' + OPERAND)


def source_files(root, tops):
    for top in tops:
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for name in sorted(files):
                if name.endswith(SUFFIXES):
                    path = os.path.join(dirpath, name)
                    yield os.path.relpath(path, root), path


def read_code(path):
    with open(path, encoding='utf-8', errors='replace') as f:
        return [strip_comment(l) for l in f]


def enum_decl(enums, ends):
    """Declarations `[ns::]E [const] [&*] name` followed by one of `ends`."""
    return re.compile(r'(?<![\w:])(?:\w+::)*(?:' + '|'.join(sorted(enums)) + r')\s*(?:const\s*)?[&*]?\s*'
                      r'(?<=[\s&*])(\w+)\s*[' + ends + ']')


def integer_mirrors(root):
    """kernels/ lines that cast an enum-typed name of lib/ or formats/ to an integer: a name the
    kernels file declares with such an enum's type (a parameter, a variable), or a member or
    function a lib/ or formats/ header declares with one."""
    headers = ['\n'.join(read_code(p)) for rel, p in source_files(root, ('lib', 'formats'))
               if rel.endswith(('.h', '.hh', '.hpp', '.cuh'))]
    sources = ['\n'.join(read_code(p)) for _, p in source_files(root, ('lib', 'formats'))]
    enums = {m.group(1) for t in sources for m in ENUM_DECL.finditer(t)}
    if not enums:
        return []
    members = {m.group(1) for t in headers for m in enum_decl(enums, ';={(').finditer(t)} - enums
    found = []
    for rel, path in source_files(root, ('kernels',)):
        code = read_code(path)
        names = members | ({m.group(1) for m in enum_decl(enums, ';=,){(').finditer('\n'.join(code))} - enums)
        for lineno, line in enumerate(code, 1):
            for m in INT_CAST.finditer(line):
                operand = next(g for g in m.groups() if g)
                last = re.split(r'\.|->|::', operand.replace('()', ''))[-1].strip()
                if last in names:
                    found.append(f'{rel}:{lineno}: casts {operand} (an enum of lib/ or formats/) to an integer; '
                                 'pass the enum and switch on it')
    return found


def strip_comment(line):
    return line.split('//', 1)[0]


def lib_room(rel):
    """'engine' for lib/engine/kv_cache/x.h; None outside lib/ or for a file directly in lib/."""
    parts = rel.replace(os.sep, '/').split('/')
    return parts[1] if len(parts) > 2 and parts[0] == 'lib' else None


def lib_violation(rel, target):
    """Why lib/ file `rel` may not include `target` (a lib/ header), or None."""
    here, there = lib_room(rel), lib_room(target)
    if here is None or there is None or here == there:
        return None
    if there == 'cpu':
        return 'includes the CPU backend (reach it through ops::make_backend and its registry)'
    if here == 'ops' and target == 'lib/model/model_config.h':
        return 'the op seam includes the model config (name the blocks: lib/model/blocks.h)'
    for room in (here, there):
        if room not in TIER:
            return f'lib/{room}/ is not in LIB_TIERS (tests/e2e/layering/layering_test.py): place it first'
    if TIER[there] >= TIER[here]:
        where = 'beside' if TIER[there] == TIER[here] else 'above'
        return f'lib/{here}/ includes lib/{there}/, a room {where} it'
    return None


def violations(root):
    found = []
    for layer, banned in FORBIDDEN.items():
        top = os.path.join(root, layer)
        for dirpath, _, files in os.walk(top):
            for name in sorted(files):
                if not name.endswith(SUFFIXES):
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, root)
                with open(path, encoding='utf-8', errors='replace') as f:
                    for lineno, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if m and m.group(1).startswith(banned):
                            found.append(f'{rel}:{lineno}: {layer}/ includes {m.group(1)}')
                        elif m and layer == 'lib' and m.group(1).startswith('lib/'):
                            why = lib_violation(rel, m.group(1))
                            if why:
                                found.append(f'{rel}:{lineno}: includes {m.group(1)}: {why}')
                        elif layer == 'lib' and CUDA_MACRO.search(strip_comment(line)):
                            found.append(f'{rel}:{lineno}: lib/ tests {CUDA_MACRO.search(line).group(0)} '
                                         '(not defined for lib/; use a registry)')
    return found + integer_mirrors(root)


def put(root, rel, text):
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, 'w') as f:
        f.write(text)


# The back-edges issues 39 and 47 removed, each planted alone into an otherwise clean tree.
BACK_EDGES = {
    'ops/backend.cc constructs the CPU backend': ('lib/ops/backend.cc', '#include "lib/cpu/cpu_backend.h"\n'),
    'ops/backend.h includes quant/fp8.h': ('lib/ops/backend.h', '#include "lib/quant/fp8.h"\n'),
    'engine/ includes quant/fp8.h': ('lib/engine/model_weights.cc', '#include "lib/quant/fp8.h"\n'),
    'decoding/decoder.cc includes ops/backend.h': ('lib/decoding/decoder.cc', '#include "lib/ops/backend.h"\n'),
    'ops/backend.h includes model/model_config.h': ('lib/ops/backend.h', '#include "lib/model/model_config.h"\n'),
}


def clean_tree(root):
    put(root, 'formats/fp8_e4m3.h', '#include <cstdint>\n')
    put(root, 'lib/ops/backend.h', '#include "formats/fp8_e4m3.h"\n#include "lib/decoding/logits_device.h"\n'
        '#include "lib/model/blocks.h"\n')
    put(root, 'lib/ops/backend.cc', '#include "lib/ops/backend.h"\n#include "lib/ops/backend_registry.h"\n')
    put(root, 'lib/cpu/cpu_backend.h', '#include "lib/ops/backend.h"\n#include "lib/cpu/simd_math.h"\n')
    put(root, 'lib/cpu/cpu_registration.cc', '#include "lib/cpu/cpu_backend.h"\n#include "lib/ops/backend_registry.h"\n')
    put(root, 'lib/engine/model_weights.cc', '#include "lib/model/fp8_files.h"\n#include "lib/ops/backend.h"\n')
    put(root, 'lib/engine/kv_cache/pool.h', '#include "lib/engine/engine.h"\n#include "lib/ops/backend.h"\n')
    put(root, 'lib/decoding/decoder.cc', '#include "lib/decoding/logits_device.h"\n#include "formats/error.h"\n')
    put(root, 'lib/quant/fp8.h', '#include "formats/fp8_e4m3.h"\n#include "lib/model/fp8_files.h"\n')
    put(root, 'lib/quant/smoothquant.cc', '#include "lib/engine/engine.h"\n#include "lib/convert/writer.h"\n')


def self_test():
    failures = []
    with tempfile.TemporaryDirectory() as root:
        put(root, 'lib/ok.cc', '#include "lib/ops/backend.h"\n#include "formats/error.h"\n// FTX_HAVE_CUDA in a comment\n')
        put(root, 'lib/a/bad.cc', '#include "kernels/cuda_backend/cuda_backend.h"\n')
        put(root, 'lib/b.h', '#ifdef FTX_HAVE_NCCL\n#endif\n')
        put(root, 'formats/ok.cc', '#include "formats/error.h"\n#include <vector>\n')
        put(root, 'formats/bad.cc', '#include <vector>\n  #  include "lib/ops/backend.h"\n')
        put(root, 'formats/bad2.h', '#include <kernels/common/cuda_check.h>\n')
        put(root, 'kernels/fine.cc', '#include "lib/ops/backend.h"\n#ifdef FTX_HAVE_CUDA\n#endif\n')
        got = sorted(v.split(':')[0] for v in violations(root))
        want = sorted(['formats/bad.cc', 'formats/bad2.h', 'lib/a/bad.cc', 'lib/b.h'])
        if got != want:
            failures.append(f'layers: flagged {got}, expected {want}')
    with tempfile.TemporaryDirectory() as root:
        clean_tree(root)
        if violations(root):
            failures.append(f'the clean tree was flagged: {violations(root)}')
    for what, (rel, line) in BACK_EDGES.items():
        with tempfile.TemporaryDirectory() as root:
            clean_tree(root)
            with open(os.path.join(root, rel), 'a') as f:
                f.write(line)
            got = violations(root)
            if len(got) != 1 or not got[0].startswith(rel + ':'):
                failures.append(f'{what}: flagged {got}, expected one violation in {rel}')
            else:
                print(f'  {what}: {got[0]}')
    with tempfile.TemporaryDirectory() as root:  # integer mirrors of lib/ enums in kernels/ (issue 46)
        put(root, 'lib/model/blocks.h', 'enum class Nonlinearity { kGeluErf, kRelu };\nclass Activation {\n'
            ' public:\n  constexpr Nonlinearity nonlinearity() const { return f_; }\n private:\n  Nonlinearity f_;\n};\n')
        put(root, 'lib/ops/op_types.h', 'namespace ftx::ops {\nenum class PositionTable { kNone, kLearned };\n}\n'
            'void embedding(ops::PositionTable table, int64_t rows);\n')
        put(root, 'kernels/ok.cc', 'void f(Activation act, int64_t rows) {\n  launch(act.nonlinearity(), '
            'static_cast<int>(rows), (int)rows);  // static_cast<int>(table) in a comment\n}\n')
        put(root, 'kernels/a.cc', 'void f(Activation act) { launch(static_cast<int>(act.nonlinearity())); }\n')
        put(root, 'kernels/b.cc', 'void g(ops::PositionTable table) {\n  run(static_cast<int32_t>( table ));\n}\n')
        put(root, 'kernels/c.cu', 'void h(const ops::PositionTable table) { run((int)table, int(table)); }\n')
        got = sorted(v.split(':')[0] + ':' + v.split(':')[1] for v in violations(root))
        want = ['kernels/a.cc:1', 'kernels/b.cc:2', 'kernels/c.cu:1', 'kernels/c.cu:1']
        if got != want:
            failures.append(f'integer mirrors: flagged {got}, expected {want}')
        else:
            print(f'  integer mirrors: {len(got)} planted casts found, the integer casts beside them passed')
    with tempfile.TemporaryDirectory() as root:  # rooms beside each other, and a room not placed
        put(root, 'lib/cpu/x.cc', '#include "lib/dist/communicator.h"\n')
        put(root, 'lib/newroom/y.cc', '#include "lib/model/model_config.h"\n')
        got = sorted(v.split(':')[0] for v in violations(root))
        if got != ['lib/cpu/x.cc', 'lib/newroom/y.cc']:
            failures.append(f'beside/unplaced rooms: flagged {got}')
    for f in failures:
        print(f'self-test failed: {f}')
    if failures:
        return 1
    print(f'self-test passed: 4 planted layer violations, each of the {len(BACK_EDGES)} lib/ back-edges '
          'alone, planted integer mirrors of lib/ enums in kernels/, a room beside another and an unplaced room '
          'found; clean trees passed')
    return 0


# ---- citations ----------------------------------------------------------------------------------
CITED_DIRS = ('formats', 'lib', 'cmd', 'kernels', 'tests', 'scripts', 'bench')
NOT_SOURCES = ('tests/fixtures/', 'tests/fuzz/corpus/', 'bench/results/')
CHECKER = 'tests/e2e/layering/layering_test.py'  # names what it forbids, to plant it
MD_CITATION = re.compile(r'(?<![\w./-])((?:[A-Za-z0-9_-]+://)?[A-Za-z0-9_./-]*[A-Za-z0-9_-]\.md)\b(#[A-Za-z0-9_-]+)?')
OUTSIDE = re.compile(r'/work/shared|\.\./shared/|\bshared/(?:trials|spec)\b')
FT_SPEC = re.compile(r'\bft-(?:format|runtime)\b')
# A section mark right after an opening parenthesis, a comma, a semicolon, a colon, a dash or the
# word "spec" names no document: "(§3.1)", "(spec §3.8, §4)", "§3.6-§3.8".
BARE_SECTION = re.compile(r'(?:^|[(,;:\-]|\b[Ss]pec)\s*§')


def cited_sources(root):
    """Relative paths of the tracked source files whose citations are checked (every file under
    CITED_DIRS and the top CMakeLists.txt, minus data); a tree without git is walked instead."""
    try:
        out = subprocess.run(['git', '-C', root, 'ls-files', '-z', '-co', '--exclude-standard', '--',
                              *CITED_DIRS, 'CMakeLists.txt'],
                             capture_output=True, check=True).stdout.decode('utf-8', 'replace')
        rels = [r for r in out.split('\0') if r]
    except (OSError, subprocess.CalledProcessError):
        rels = []
        for top in CITED_DIRS:
            for dirpath, dirs, files in os.walk(os.path.join(root, top)):
                dirs[:] = [d for d in dirs if d != '__pycache__']
                rels += [os.path.relpath(os.path.join(dirpath, f), root).replace(os.sep, '/') for f in files]
        if os.path.exists(os.path.join(root, 'CMakeLists.txt')):
            rels.append('CMakeLists.txt')
    return sorted(r for r in rels if not r.startswith(NOT_SOURCES) and r != CHECKER)


def github_anchor(heading):
    """The fragment GitHub gives a Markdown heading: lower case, punctuation dropped, spaces to '-'."""
    return re.sub(r'[^\w\- ]', '', heading.strip().lower()).replace(' ', '-')


def anchors_of(path):
    with open(path, encoding='utf-8', errors='replace') as f:
        return {github_anchor(m.group(1)) for m in re.finditer(r'^#{1,6}\s+(.+?)\s*#*\s*$', f.read(), re.M)}


def citation_violations(root):
    found = []
    for rel in cited_sources(root):
        path = os.path.join(root, rel)
        if not os.path.isfile(path):
            continue
        with open(path, 'rb') as f:
            data = f.read()
        if b'\0' in data:
            continue  # binary
        for lineno, line in enumerate(data.decode('utf-8', 'replace').splitlines(), 1):
            where = f'{rel}:{lineno}'
            if OUTSIDE.search(line):
                found.append(f'{where}: names {OUTSIDE.search(line).group(0)}, which is not in the repository')
            if FT_SPEC.search(line):
                found.append(f'{where}: cites {FT_SPEC.search(line).group(0)}, a fact spec that is not in the '
                             'repository (cite docs/ or state the fact)')
            elif BARE_SECTION.search(line):
                found.append(f'{where}: "{BARE_SECTION.search(line).group(0).strip()}" cites a section of no '
                             'named document')
            for m in MD_CITATION.finditer(line):
                name, anchor = m.group(1), m.group(2)
                if '://' in name or FT_SPEC.search(name) or OUTSIDE.search(name):
                    continue  # a web address, or already reported above
                top = os.path.abspath(root)
                inside = [os.path.normpath(os.path.join(top, base, name)) for base in ('', 'docs')]
                page = next((c for c in inside if c.startswith(top + os.sep) and os.path.isfile(c)), None)
                if page is None:
                    found.append(f'{where}: cites {name}, which is not in the repository (nor in docs/)')
                elif anchor and anchor[1:].lower() not in anchors_of(page):
                    found.append(f'{where}: cites {name}{anchor}, but {os.path.relpath(page, top)} has no such heading')
    return found


def citations_self_test():
    good = {
        'lib/a/ok.h': '// see docs/page.md and docs/page.md#the-models-math; README.md; page.md\n'
                      '// https://example.org/elsewhere/NOTES.md (an address); Higham §4.2; arXiv:2412.19437 §3.3.2\n',
        'tests/unit/ok_test.cc': '// data/x/SOURCE.md lists them\n',
        'tests/fixtures/any/notes.txt': 'ft-format.md §3 (data, not a source)\n',
        'bench/results/run.txt': 'see missing.md (a record)\n',
    }
    bad = {
        'missing page': ('lib/a/b.cc', '// (docs/no-such-page.md)\n'),
        'missing anchor': ('lib/a/c.cc', '// docs/page.md#no-such-heading\n'),
        'FT spec with .md': ('cmd/d.cc', '// (spec ft-format.md §3.1)\n'),
        'FT spec without .md': ('kernels/e.h', '// (ft-runtime §2.11)\n'),
        'shared spec': ('scripts/f.py', '"""docs: /work/shared/spec/notes"""\n'),
        'trial report': ('tests/e2e/g_test.py', '"""the report is ../shared/trials/new-user.md"""\n'),
        'bare section': ('formats/h.cc', '// FT stores rows [2:] (§3.6).\n'),
        'spec section': ('lib/i.h', '// Megatron folders (spec §3.8, §4)\n'),
        'missing SOURCE.md': ('tests/unit/j_test.cc', '// listed in data/nowhere/SOURCE.md\n'),
        'outside the root': ('tests/unit/l_test.cc', '// see ../../elsewhere/NOTES.md\n'),
        'shebang script': ('bench/k', '#!/bin/sh\n# see docs/gone.md\n'),
    }
    pages = {'docs/page.md': "# Page\n\n## The model's math\n", 'README.md': '# r\n', 'data/x/SOURCE.md': 'x\n'}
    failures = []
    with tempfile.TemporaryDirectory() as root:
        for rel, text in {**pages, **good}.items():
            put(root, rel, text)
        got = citation_violations(root)
        if got:
            failures.append(f'the clean tree was flagged: {got}')
    for what, (rel, text) in bad.items():
        with tempfile.TemporaryDirectory() as root:
            for r, t in {**pages, **good}.items():
                put(root, r, t)
            put(root, rel, text)
            got = citation_violations(root)
            if len(got) != 1 or not got[0].startswith(rel + ':'):
                failures.append(f'{what}: flagged {got}, expected one violation in {rel}')
            else:
                print(f'  {what}: {got[0]}')
    for f in failures:
        print(f'citations self-test failed: {f}')
    if failures:
        return 1
    print(f'citations self-test passed: each of {len(bad)} planted bad citations found alone; '
          'good citations, web addresses, data and records passed')
    return 0


def check_citations(root):
    found = citation_violations(root)
    for v in found:
        print(v)
    if found:
        print(f'{len(found)} citation(s) nobody can follow')
        return 1
    print(f'citations: every document the {len(cited_sources(root))} sources cite is in the repository')
    return 0


def main():
    if sys.argv[1:] == ['--self-test']:
        return self_test()
    if sys.argv[1:] == ['--citations-self-test']:
        return citations_self_test()
    if len(sys.argv) == 3 and sys.argv[1] == '--citations':
        return check_citations(sys.argv[2])
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    found = violations(sys.argv[1])
    for v in found:
        print(v)
    if found:
        print(f'{len(found)} layering violation(s)')
        return 1
    print('layering: formats/ and lib/ clean, lib/ rooms in their tiers, no integer mirror of an enum in kernels/')
    return 0


if __name__ == '__main__':
    sys.exit(main())
