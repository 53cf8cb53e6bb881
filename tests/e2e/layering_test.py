#!/usr/bin/env python3
"""The layering rule (ctest label `layering`): formats/ includes neither lib/ nor kernels/; lib/
includes no kernels/ header and does not branch on FTX_HAVE_CUDA / FTX_HAVE_NCCL (those are defined
for kernels/ and what links it, not for lib/; lib/ reaches CUDA through its registries).

Usage: layering_test.py SOURCE_DIR    checks the tree, prints every violation, exits 1 if any
       layering_test.py --self-test   checks the checker on a scratch tree with planted violations
"""
import os
import re
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


def strip_comment(line):
    return line.split('//', 1)[0]


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
                        elif layer == 'lib' and CUDA_MACRO.search(strip_comment(line)):
                            found.append(f'{rel}:{lineno}: lib/ tests {CUDA_MACRO.search(line).group(0)} '
                                         '(not defined for lib/; use a registry)')
    return found


def self_test():
    with tempfile.TemporaryDirectory() as root:
        def put(rel, text):
            path = os.path.join(root, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, 'w') as f:
                f.write(text)
        put('lib/ok.cc', '#include "lib/ops/backend.h"\n#include "formats/error.h"\n// FTX_HAVE_CUDA in a comment\n')
        put('lib/a/bad.cc', '#include "kernels/cuda_backend/cuda_backend.h"\n')
        put('lib/b.h', '#ifdef FTX_HAVE_NCCL\n#endif\n')
        put('formats/ok.cc', '#include "formats/error.h"\n#include <vector>\n')
        put('formats/bad.cc', '#include <vector>\n  #  include "lib/ops/backend.h"\n')
        put('formats/bad2.h', '#include <kernels/common/cuda_check.h>\n')
        put('kernels/fine.cc', '#include "lib/ops/backend.h"\n#ifdef FTX_HAVE_CUDA\n#endif\n')
        got = sorted(v.split(':')[0] for v in violations(root))
        want = sorted(['formats/bad.cc', 'formats/bad2.h', 'lib/a/bad.cc', 'lib/b.h'])
        if got != want:
            print(f'self-test failed: flagged {got}, expected {want}')
            return 1
    print('self-test passed: 4 planted violations found, clean files passed')
    return 0


def main():
    if sys.argv[1:] == ['--self-test']:
        return self_test()
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    found = violations(sys.argv[1])
    for v in found:
        print(v)
    if found:
        print(f'{len(found)} layering violation(s)')
        return 1
    print('layering: formats/ and lib/ clean')
    return 0


if __name__ == '__main__':
    sys.exit(main())
