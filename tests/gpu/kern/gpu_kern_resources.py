#!/usr/bin/env python3
"""Every kernel of the built CUDA module fits the devices it is built for.

    gpu_kern_resources.py MODULE BLOCKS [--cuobjdump PATH] [--selftest]

MODULE is libhipress_cuda.so; BLOCKS the lines "kernel threads" of
tests/gpu/simt/simt_kern (the most threads per block each kernel was launched
with by the module's own launchers, run on the SIMT emulator: the launch
configurations come from the code that launches, so they cannot go stale).
The registers, static shared memory, stack frame and launch bounds of each
kernel are read from the module itself: the cubins in its fatbin (the
.nv_fatbin section), one per architecture, each an ELF whose .nv.info
sections carry the attributes ptxas wrote (EIATTR_REGCOUNT per function
symbol, EIATTR_MAX_THREADS from __launch_bounds__, EIATTR_FRAME_SIZE) and
whose .nv.shared.<kernel> section is the kernel's static shared memory.
When cuobjdump is at hand its --dump-resource-usage must agree.

A launch of T threads per block fits a device when:
  * T <= the kernel's launch bound (a launch past it fails), T <= 1024;
  * its registers fit the block: per warp ceil(32 r / 256) * 256 registers
    (the allocation unit), times ceil(T / 32) warps, at most 65536, and r at
    most 255;
  * static + dynamic shared memory <= 48 KiB (more needs an opt-in the
    module never makes); the dynamic part is 0: HP_LAUNCH passes none and
    the SIMT dialect has no dynamic shared memory, so no kernel can use it.
Prints one line per kernel for sm_90 and checks every architecture of the
module; exits 1 on a kernel that does not fit, one of the module that was
not launched or the reverse, or a disagreement with cuobjdump.
--selftest: the same checks on the module's numbers altered in each of the
ways above, each of which must fail.
"""
import os
import re
import struct
import subprocess
import sys

FATBIN_MAGIC = 0xBA55ED50
EIATTR_MAX_THREADS = 0x05
EIATTR_FRAME_SIZE = 0x11
EIATTR_REGCOUNT = 0x2F
EIFMT_SVAL = 0x04
REGS_PER_BLOCK = 65536
REG_UNIT = 256            # registers are allocated per warp in units of 256
MAX_REGS = 255
MAX_THREADS = 1024
STATIC_SHARED = 48 << 10
REPORT_ARCH = 90


def sections(elf):
    """name -> (type, offset, size, info) of an ELF64 little-endian image"""
    shoff = struct.unpack_from('<Q', elf, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from('<HHH', elf, 0x3A)
    raw = []
    for i in range(shnum):
        raw.append(struct.unpack_from('<IIQQQQII', elf, shoff + i * shentsize))
    strs = raw[shstrndx][4]
    out, order = {}, []
    for name, typ, _flags, _addr, off, size, link, info in raw:
        n = elf[strs + name:elf.index(b'\0', strs + name)].decode()
        out[n] = (typ, off, size, info, link)
        order.append(n)
    return out, order


def cubins(module):
    """(sm, cubin) of every ELF entry of the module's fatbin"""
    secs, _ = sections(module)
    if '.nv_fatbin' not in secs:
        raise SystemExit('gpu_kern_resources: no .nv_fatbin section: not a CUDA module')
    _t, off, size, _i, _l = secs['.nv_fatbin']
    end = off + size
    while off < end:
        magic, _ver, hsize, fsize = struct.unpack_from('<IHHQ', module, off)
        if magic != FATBIN_MAGIC:
            break
        p, stop = off + hsize, off + hsize + fsize
        while p < stop:
            kind, _ev, ehs, psize = struct.unpack_from('<HHIQ', module, p)
            sm = struct.unpack_from('<I', module, p + 28)[0]
            flags = struct.unpack_from('<I', module, p + 40)[0]
            if kind == 2:
                cubin = module[p + ehs:p + ehs + psize]
                # (nvcc compresses the PTX, 0x8000, not the cubins; a
                # compressed cubin, or another layout, is not read here)
                if flags & 0xA000 or cubin[:4] != b'\x7fELF':
                    raise SystemExit('gpu_kern_resources: the sm_%d entry of the fatbin is not a plain ELF '
                                     '(flags 0x%x): compressed, or a layout this script does not know' % (sm, flags))
                yield sm, cubin
            p += ehs + psize
        off = stop


def plain_name(mangled):
    """_Z16k_onebit_enc_regILb1EEvPKf... -> k_onebit_enc_reg"""
    m = re.match(r'_Z(\d+)', mangled)
    if not m:
        return mangled
    n = int(m.group(1))
    return mangled[m.end():m.end() + n]


def info_entries(data):
    i = 0
    while i + 4 <= len(data):
        fmt, attr, v = data[i], data[i + 1], struct.unpack_from('<H', data, i + 2)[0]
        if fmt == EIFMT_SVAL:
            yield attr, data[i + 4:i + 4 + v]
            i += 4 + v
        else:
            yield attr, v
            i += 4


def kernels(cubin):
    """(plain name, dict(regs, shared, frame, bound, mangled)) of each
    kernel of a cubin (a template's instances share a plain name)"""
    secs, _ = sections(cubin)
    symtab = secs['.symtab']
    strtab = secs['.strtab']
    syms = []
    for k in range(symtab[2] // 24):
        name, _info, _other, _shndx, _value, _size = struct.unpack_from('<IBBHQQ', cubin, symtab[1] + 24 * k)
        syms.append(cubin[strtab[1] + name:cubin.index(b'\0', strtab[1] + name)].decode())
    regs, frame = {}, {}
    for attr, val in info_entries(cubin[secs['.nv.info'][1]:secs['.nv.info'][1] + secs['.nv.info'][2]]):
        if attr in (EIATTR_REGCOUNT, EIATTR_FRAME_SIZE) and isinstance(val, bytes):
            sym, v = struct.unpack('<II', val[:8])
            (regs if attr == EIATTR_REGCOUNT else frame)[syms[sym]] = v
    out = []
    for n, (_t, off, size, _i, _l) in secs.items():
        if not n.startswith('.text.'):
            continue
        mangled = n[len('.text.'):]
        bound = 0
        if '.nv.info.' + mangled in secs:
            _t2, o2, s2, _i2, _l2 = secs['.nv.info.' + mangled]
            for attr, val in info_entries(cubin[o2:o2 + s2]):
                if attr == EIATTR_MAX_THREADS and isinstance(val, bytes):
                    x, y, z = struct.unpack('<III', val[:12])
                    bound = x * y * z
        shared = secs.get('.nv.shared.' + mangled, (0, 0, 0, 0, 0))[2]
        if mangled not in regs:
            raise SystemExit('gpu_kern_resources: no register count for %s' % mangled)
        out.append((plain_name(mangled), dict(regs=regs[mangled], shared=shared, frame=frame.get(mangled, 0),
                                              bound=bound, mangled=mangled)))
    return out


def regs_per_block(regs, threads):
    per_warp = -(-regs * 32 // REG_UNIT) * REG_UNIT
    return per_warp * -(-threads // 32)


def check(arch_kernels, blocks):
    """the problems of every architecture's kernels against the launches"""
    bad = []
    for sm, ks in sorted(arch_kernels.items()):
        # a kernel with several instances (templates) must fit in each
        names = sorted(set(ks))
        if set(names) != set(blocks):
            for k in sorted(set(names) - set(blocks)):
                bad.append('sm_%d: %s is in the module but was never launched' % (sm, k))
            for k in sorted(set(blocks) - set(names)):
                bad.append('sm_%d: %s was launched but is not in the module' % (sm, k))
        for k in names:
            if k not in blocks:
                continue
            for inst in ks[k]:
                t = blocks[k]
                need = max(t, inst['bound'])
                if t > MAX_THREADS:
                    bad.append('sm_%d: %s launched with %d threads per block (at most %d)' % (sm, k, t, MAX_THREADS))
                if inst['bound'] and t > inst['bound']:
                    bad.append('sm_%d: %s launched with %d threads, past its __launch_bounds__(%d)'
                               % (sm, k, t, inst['bound']))
                if inst['regs'] > MAX_REGS:
                    bad.append('sm_%d: %s: %d registers per thread (at most %d)' % (sm, k, inst['regs'], MAX_REGS))
                elif regs_per_block(inst['regs'], need) > REGS_PER_BLOCK:
                    bad.append('sm_%d: %s: %d registers x %d threads need %d registers of a block (at most %d)'
                               % (sm, k, inst['regs'], need, regs_per_block(inst['regs'], need), REGS_PER_BLOCK))
                if inst['shared'] > STATIC_SHARED:
                    bad.append('sm_%d: %s: %d bytes of static shared memory (at most %d)'
                               % (sm, k, inst['shared'], STATIC_SHARED))
    return bad


def cuobjdump_usage(tool, module):
    """(sm, mangled) -> (regs, shared) from cuobjdump --dump-resource-usage"""
    out = subprocess.run([tool, '--dump-resource-usage', module], capture_output=True, text=True, check=True).stdout
    res, sm, fn = {}, None, None
    for line in out.splitlines():
        m = re.match(r'\s*arch = sm_(\d+)', line)
        if m:
            sm = int(m.group(1))
        m = re.match(r'\s*Function (\S+):', line)
        if m:
            fn = m.group(1)
        m = re.match(r'\s*REG:(\d+) STACK:(\d+) SHARED:(\d+)', line)
        if m and fn is not None:
            res[(sm, fn)] = (int(m.group(1)), int(m.group(3)))
            fn = None
    return res


def main(argv):
    args = [a for a in argv[1:] if not a.startswith('--')]
    tool = None
    if '--cuobjdump' in argv:
        tool = argv[argv.index('--cuobjdump') + 1]
        args.remove(tool)
    if len(args) != 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    module = open(args[0], 'rb').read()
    blocks = {}
    for line in open(args[1]):
        f = line.split()
        if len(f) == 2 and f[1].isdigit():
            blocks[f[0]] = int(f[1])
    if not blocks:
        print('gpu_kern_resources: no launches in %s' % args[1])
        return 1
    arch = {}
    for sm, cb in cubins(module):
        ks = arch.setdefault(sm, {})
        for k, v in kernels(cb):
            ks.setdefault(k, []).append(v)
    if REPORT_ARCH not in arch:
        print('gpu_kern_resources: the module has no sm_%d cubin (architectures: %s)'
              % (REPORT_ARCH, ', '.join('sm_%d' % a for a in sorted(arch))))
        return 1
    status = 0
    if tool:
        ref = cuobjdump_usage(tool, args[0])
        n = 0
        for sm, ks in arch.items():
            for k, insts in ks.items():
                for v in insts:
                    r = ref.get((sm, v['mangled']))
                    n += 1
                    if r != (v['regs'], v['shared']):
                        print('FAIL: sm_%d %s: read %d registers, %d shared bytes; cuobjdump says %s'
                              % (sm, v['mangled'], v['regs'], v['shared'], r))
                        status = 1
        print('# cuobjdump --dump-resource-usage agrees on %d kernel instances' % n if not status else
              '# cuobjdump disagrees')
    if '--selftest' in argv:
        return selftest(arch, blocks)
    print('# %-22s %5s %7s %6s %6s %7s %13s' % ('kernel (sm_%d)' % REPORT_ARCH, 'regs', 'shared', 'stack',
                                                'bound', 'threads', 'regs/block'))
    for k in sorted(arch[REPORT_ARCH]):
        for v in arch[REPORT_ARCH][k]:
            t = blocks.get(k, 0)
            need = max(t, v['bound'])
            print('%-24s %5d %7d %6d %6s %7d %6d/%d' % (k, v['regs'], v['shared'], v['frame'], v['bound'] or '-', t,
                                                      regs_per_block(v['regs'], need), REGS_PER_BLOCK))
    bad = check(arch, blocks)
    for b in bad:
        print('FAIL: ' + b)
    nk = len(arch[REPORT_ARCH])
    ni = sum(len(v) for v in arch[REPORT_ARCH].values())
    print('gpu_kern_resources: %d kernels (%d instances) on %s: %s' % (
        nk, ni, ', '.join('sm_%d' % a for a in sorted(arch)),
        'every launch fits' if not bad else '%d problems' % len(bad)))
    return 1 if bad or status else 0


def selftest(arch, blocks):
    """each way of not fitting, planted in the module's real numbers, caught"""
    import copy
    assert not check(arch, blocks), 'the real module must fit for the self-test'
    heavy = max(arch[REPORT_ARCH], key=lambda k: max(v['regs'] for v in arch[REPORT_ARCH][k]))
    bound = next(k for k in sorted(arch[REPORT_ARCH]) if any(v['bound'] for v in arch[REPORT_ARCH][k]))
    cases = []
    def planted(field, value):
        a = copy.deepcopy(arch)
        for ks in a.values():
            for v in ks[heavy]:
                v[field] = value
        return a
    a = planted('bound', 0)
    b = dict(blocks)
    b[heavy] = 1024
    cases.append(('%s (the most registers) without its launch bound, launched with 1024 threads' % heavy, a, b))
    b = dict(blocks)
    b[bound] = max(v['bound'] for v in arch[REPORT_ARCH][bound]) + 32
    cases.append(('%s launched past its launch bound' % bound, arch, b))
    cases.append(('%s with 48 KiB + 4 bytes of shared memory' % heavy, planted('shared', STATIC_SHARED + 4), blocks))
    cases.append(('%s with 256 registers' % heavy, planted('regs', 256), blocks))
    b = dict(blocks)
    del b[heavy]
    cases.append(('%s never launched' % heavy, arch, b))
    b = dict(blocks)
    b['k_not_in_the_module'] = 32
    cases.append(('a kernel launched that the module lacks', arch, b))
    status = 0
    for what, a, b in cases:
        bad = check(a, b)
        print('# %s: %s' % (what, bad[0] if bad else 'NOT CAUGHT'))
        status |= not bad
    print('gpu_kern_resources: self-test: %d of %d planted problems caught' % (
        sum(1 for _w, a, b in cases if check(a, b)), len(cases)))
    return status


if __name__ == '__main__':
    sys.exit(main(sys.argv))
