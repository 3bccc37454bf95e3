"""Groups `perf report -F sample,dso,sym` lines (stdin) into what a start
spends its time on; prints each group's share of the process's samples."""
import re
import sys

GROUPS = [
    ("glibc CPU feature detection (CPUID)", r"init_cpu_features|handle_amd|update_active|get_common_indices|get_extended_indices|cacheinfo"),
    ("aws-lc constructor (CPUID)", r"OPENSSL_cpuid_setup"),
    ("Rust std_detect (CPUID, for httparse)", r"std_detect"),
    ("dynamic loader: relocations, symbols", r"^ld-linux|_dl_relocate|_dl_lookup|do_lookup|_dl_map|_dl_start|_dl_sysdep|_dl_init|_dl_fixup|_dl_catch|_dl_new_object|elf_machine|check_match|strcmp"),
    ("clap: building and parsing the command line", r"clap|cli\.\.|cli::|augment_args|OsStr.*PartialEq|PartialEq<&B>|getenv|_var_os"),
    ("malloc and free", r"malloc|_int_free|cfree|unlink_chunk|malloc_consolidate|__libc_free|realloc"),
    ("memcpy, memmove, memset", r"memmove|memcpy|memset|memcmp"),
    ("kernel: exec, page faults, system calls, exit", r"^\[kernel"),
    ("staticd and its other crates", r"staticd|httparse|rustix|std::|core::|alloc::|hashbrown|tokio|mime"),
]


def main():
    counts = {name: 0 for name, _ in GROUPS}
    counts["other"] = 0
    total = 0
    for line in sys.stdin:
        parts = line.split(None, 2)
        if len(parts) < 3 or not parts[0].isdigit():
            continue
        n, dso, sym = int(parts[0]), parts[1], parts[2]
        total += n
        key = dso + " " + sym
        for name, pattern in GROUPS:
            if re.search(pattern, key):
                counts[name] += n
                break
        else:
            counts["other"] += n
    for name, n in sorted(counts.items(), key=lambda kv: -kv[1]):
        print(f"{100.0 * n / max(total, 1):5.1f}%  {name}")
    print(f"{total} samples")


main()
