//! `ksyms KERNEL.elf`: the post-link step of every kernel build.
//!
//! 1. Sorts `__patchable_function_entries` in place and drops the entries that
//!    are not the site of a function in `.text`, or whose 8-byte ops literal
//!    is not aligned (those functions stay untraced), as Linux's
//!    scripts/sorttable sorts `__mcount_loc`: valid entries first,
//!    ascending, then zeros.
//! 2. Writes the kernel symbol table (address, size, demangled Rust path
//!    without the hash, such as `kernel::workload::fs::lookup`, of every
//!    function, then of every static a probe event's `@SYM` can read) into the
//!    `.kernel_symbols` section the linker script reserves, in the format of
//!    `ftrace::symbols::table`.
//!
//! The kernel then resolves names and addresses with no second link. Running
//! the tool twice on one image is harmless (it yields the same bytes).

use std::collections::BTreeMap;
use std::process::ExitCode;

use ftrace::symbols::table::{self, Symbol};
use goblin::elf::{header, section_header::SectionHeader, sym, Elf};

/// Bytes between a patchable-entry table entry and its function's address:
/// the ops literal (`ftrace::patch::geometry`), on both architectures.
fn site_prefix(machine: u16) -> Result<u64, String> {
    match machine {
        header::EM_X86_64 | header::EM_AARCH64 => Ok(ftrace::patch::geometry::LITERAL_BYTES as u64),
        other => Err(format!("unsupported ELF machine {other}")),
    }
}

fn section<'a>(elf: &'a Elf, name: &str) -> Result<&'a SectionHeader, String> {
    elf.section_headers
        .iter()
        .find(|sh| elf.shdr_strtab.get_at(sh.sh_name) == Some(name))
        .ok_or_else(|| format!("no section {name} (is the linker script from boot/ in use?)"))
}

struct Report {
    symbols: usize,
    sites: usize,
    dropped: usize,
}

fn process(image: &mut [u8]) -> Result<Report, String> {
    let elf = Elf::parse(image).map_err(|e| format!("not an ELF file: {e}"))?;
    if !elf.is_64 || !elf.little_endian {
        return Err("expected a little-endian ELF64 kernel".into());
    }
    let prefix = site_prefix(elf.header.e_machine)?;
    let text = section(&elf, ".text")?;
    let text_range = text.sh_addr..text.sh_addr + text.sh_size;
    let sites = section(&elf, "__patchable_function_entries")?.clone();
    let table = section(&elf, ".kernel_symbols")?.clone();

    // Functions in .text, one name per address (the first in symbol order),
    // and data objects (statics, with a size) outside it, for `@SYM`.
    let mut functions: BTreeMap<u64, (u64, String)> = BTreeMap::new();
    let mut data: BTreeMap<u64, (u64, String)> = BTreeMap::new();
    for symbol in elf.syms.iter() {
        let Some(raw) = elf.strtab.get_at(symbol.st_name) else { continue };
        if symbol.st_size == 0 {
            continue;
        }
        if symbol.st_type() == sym::STT_FUNC && text_range.contains(&symbol.st_value) {
            functions.entry(symbol.st_value).or_insert((symbol.st_size, demangle(raw)));
        } else if symbol.st_type() == sym::STT_OBJECT && !text_range.contains(&symbol.st_value) {
            data.entry(symbol.st_value).or_insert((symbol.st_size, demangle(raw)));
        }
    }

    let offset = sites.sh_offset as usize;
    let count = sites.sh_size as usize / 8;
    let entries: Vec<u64> =
        (0..count).map(|i| u64::from_le_bytes(image[offset + 8 * i..offset + 8 * i + 8].try_into().unwrap())).collect();
    let (table_entries, dropped) =
        sort_sites(&entries, |entry| is_aligned_site(entry) && functions.contains_key(&(entry + prefix)));
    for (i, value) in table_entries.iter().enumerate() {
        image[offset + 8 * i..offset + 8 * i + 8].copy_from_slice(&value.to_le_bytes());
    }
    let sites = table_entries.iter().filter(|&&entry| entry != 0).count();

    let bytes = symbol_table(&functions, &data, sites, table.sh_size as usize)?;
    let start = table.sh_offset as usize;
    image[start..start + bytes.len()].copy_from_slice(&bytes);
    image[start + bytes.len()..start + table.sh_size as usize].fill(0);
    Ok(Report { symbols: functions.len(), sites, dropped })
}

/// Whether a patchable entry's ops literal (its first bytes) is one aligned
/// word, which one store replaces and the trampolines load whole while
/// other CPUs change it. `-Zmin-function-alignment` aligns the kernel's
/// functions so, but not the drop glue and other shims rustc makes: those
/// sites are dropped (the functions stay untraced).
fn is_aligned_site(entry: u64) -> bool {
    entry.is_multiple_of(ftrace::patch::geometry::LITERAL_BYTES as u64)
}

/// A symbol's name as traces show it: the demangled Rust path without the
/// hash (`kernel::workload::fs::lookup`).
fn demangle(raw: &str) -> String {
    format!("{:#}", rustc_demangle::demangle(raw))
}

/// The sorted site table: the entries that are a function's site
/// (`is_site`), ascending, without duplicates, then zeros to the table's
/// length (as Linux's scripts/sorttable sorts `__mcount_loc`). Also answers
/// how many non-zero entries were dropped.
fn sort_sites(entries: &[u64], is_site: impl Fn(u64) -> bool) -> (Vec<u64>, usize) {
    let mut valid: Vec<u64> = entries.iter().copied().filter(|&entry| entry != 0 && is_site(entry)).collect();
    valid.sort_unstable();
    valid.dedup();
    let dropped = entries.iter().filter(|&&entry| entry != 0).count() - valid.len();
    let mut table = valid;
    table.resize(entries.len(), 0);
    (table, dropped)
}

/// The `.kernel_symbols` contents (`ftrace::symbols::table` format) for
/// `functions` and `data` (address -> (size, name)) and the number of sites.
fn symbol_table(
    functions: &BTreeMap<u64, (u64, String)>,
    data: &BTreeMap<u64, (u64, String)>,
    sites: usize,
    capacity: usize,
) -> Result<Vec<u8>, String> {
    fn symbols(map: &BTreeMap<u64, (u64, String)>) -> Vec<Symbol<'_>> {
        map.iter().map(|(&address, (size, name))| Symbol { name, address: address as usize, size: *size as usize }).collect()
    }
    table::encode(&symbols(functions), &symbols(data), sites, capacity).map_err(|e| e.to_string())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let [_, path] = args.as_slice() else {
        eprintln!("usage: ksyms KERNEL.elf");
        return ExitCode::from(2);
    };
    let mut image = match std::fs::read(path) {
        Ok(image) => image,
        Err(e) => {
            eprintln!("ksyms: cannot read {path}: {e}");
            return ExitCode::FAILURE;
        }
    };
    match process(&mut image).and_then(|report| {
        std::fs::write(path, &image).map_err(|e| format!("cannot write {path}: {e}"))?;
        Ok(report)
    }) {
        Ok(report) => {
            if std::env::var_os("KSYMS_VERBOSE").is_some() {
                eprintln!(
                    "ksyms: {path}: {} symbols, {} patchable sites ({} entries dropped)",
                    report.symbols, report.sites, report.dropped
                );
            }
            ExitCode::SUCCESS
        }
        Err(message) => {
            eprintln!("ksyms: {path}: {message}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ftrace::symbols::table::Kallsyms;

    /// The flag each architecture's kernel profile passes to the traced
    /// crate: `-Zpatchable-function-entry=TOTAL,PREFIX`, x86_64 counting
    /// bytes (an 8-byte prefix, a 5-byte call slot), aarch64 4-byte
    /// instructions (two prefix NOPs, `mov x9, x30`, the call slot); and the
    /// unit PREFIX counts in.
    const PATCHABLE_ENTRY_FLAGS: [(&str, &str, usize); 2] =
        [("x86_64", "-Zpatchable-function-entry=13,8", 1), ("aarch64", "-Zpatchable-function-entry=4,2", 4)];

    #[test]
    fn the_kernel_profiles_ask_for_the_site_geometry() {
        let cargo_toml = include_str!("../../../Cargo.toml");
        for (arch, flag, unit) in PATCHABLE_ENTRY_FLAGS {
            let section = format!("[profile.kernel-{arch}.package.kernel]\nrustflags = [\"{flag}\"");
            assert!(cargo_toml.contains(&section), "Cargo.toml's kernel-{arch} profile must pass {flag}");
            let prefix: usize = flag.rsplit(',').next().unwrap().parse().unwrap();
            assert_eq!(prefix * unit, ftrace::patch::geometry::LITERAL_BYTES, "{arch}: the prefix is the ops literal");
        }
    }

    #[test]
    fn sites_are_sorted_deduplicated_and_padded_with_zeros() {
        let functions = [0x1008u64, 0x2008, 0x3008, 0x400c];
        let entries = [0x3000, 0, 0x1000, 0x9999, 0x3000, 0x2000, 0x4004, 0];
        let is_site = |entry: u64| is_aligned_site(entry) && functions.contains(&(entry + 8));
        let (table, dropped) = sort_sites(&entries, is_site);
        assert_eq!(table, [0x1000, 0x2000, 0x3000, 0, 0, 0, 0, 0]);
        assert_eq!(dropped, 3, "the entry of no function, the duplicate and the unaligned literal");
        let (again, dropped) = sort_sites(&table, is_site);
        assert_eq!((again, dropped), (table.clone(), 0), "running twice yields the same table");
    }

    #[test]
    fn the_symbol_table_reads_back_through_kallsyms() {
        let mut functions = BTreeMap::new();
        functions.insert(0x4000_1000u64, (0x40u64, "kernel::workload::fib".to_string()));
        functions.insert(0x4000_0800, (0x20, "kernel::main".to_string()));
        functions.insert(0x4000_2000, (0x10, "core::ptr::drop_in_place<alloc::string::String>".to_string()));
        let bytes = symbol_table(&functions, &BTreeMap::new(), 2, 4096).unwrap();
        let table = Kallsyms::parse(&bytes).unwrap();
        assert_eq!((table.len(), table.site_count()), (3, 2));
        let names: Vec<&str> = table.iter().map(|symbol| symbol.name).collect();
        assert_eq!(
            names,
            ["kernel::main", "kernel::workload::fib", "core::ptr::drop_in_place<alloc::string::String>"],
            "address order"
        );
        let fib = table.by_name("kernel::workload::fib").unwrap();
        assert_eq!((fib.address, fib.size), (0x4000_1000, 0x40));
        assert_eq!(table.lookup(0x4000_1020).map(|symbol| symbol.name), Some("kernel::workload::fib"));
        assert_eq!(table.lookup(0x4000_1040), None, "past the function's end");
        assert!(symbol_table(&functions, &BTreeMap::new(), 2, 16).is_err(), "a table that does not fit is refused");
    }

    #[test]
    fn names_are_demangled_without_their_hash() {
        assert_eq!(demangle("_ZN6kernel8workload3fib17h0123456789abcdefE"), "kernel::workload::fib");
        assert_eq!(demangle("ftrace_caller"), "ftrace_caller");
    }
}
