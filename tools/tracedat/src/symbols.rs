//! The kernel's symbols, from the `.kernel_symbols` section of its image (the
//! same table the kernel used for `cat trace`).

use ftrace::symbols::table::{Kallsyms, Symbol};
use goblin::elf::Elf;

/// The image's symbol table, owned.
pub struct Symbols {
    /// (address, size, name), sorted by address.
    entries: Vec<(usize, usize, String)>,
}

impl Symbols {
    /// Reads the table from a post-linked kernel image.
    pub fn from_elf(image: &[u8]) -> Result<Symbols, String> {
        let elf = Elf::parse(image).map_err(|e| format!("not an ELF image: {e}"))?;
        let section = elf
            .section_headers
            .iter()
            .find(|sh| elf.shdr_strtab.get_at(sh.sh_name) == Some(".kernel_symbols"))
            .ok_or("the image has no .kernel_symbols section")?;
        let bytes = &image[section.sh_offset as usize..(section.sh_offset + section.sh_size) as usize];
        // The parser wants 8-byte alignment, which a file buffer need not have.
        let mut words = vec![0u64; bytes.len().div_ceil(8)];
        // SAFETY: `words` has room for `bytes.len()` bytes.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), words.as_mut_ptr() as *mut u8, bytes.len()) };
        // SAFETY: the words hold `bytes.len()` initialised bytes.
        let aligned = unsafe { std::slice::from_raw_parts(words.as_ptr() as *const u8, bytes.len()) };
        let table = Kallsyms::parse(aligned).map_err(|e| format!("kernel symbols: {e}"))?;
        Ok(Symbols { entries: table.iter().map(|s| (s.address, s.size, s.name.to_string())).collect() })
    }

    #[cfg(test)]
    pub fn from_entries(entries: Vec<(usize, usize, String)>) -> Symbols {
        Symbols { entries }
    }

    /// The function containing `address`.
    pub fn lookup(&self, address: usize) -> Option<Symbol<'_>> {
        let after = self.entries.partition_point(|(start, _, _)| *start <= address);
        let (start, size, name) = self.entries.get(after.checked_sub(1)?)?;
        let symbol = Symbol { name, address: *start, size: *size };
        symbol.contains(address).then_some(symbol)
    }

    /// `/proc/kallsyms` text: `ADDRESS T NAME` lines. Spaces cannot appear in
    /// a kallsyms name (readers split on them), so `<A as B>::f` becomes
    /// `<A_as_B>::f`.
    pub fn kallsyms_text(&self) -> String {
        let mut text = String::new();
        for (address, _, name) in &self.entries {
            text.push_str(&format!("{address:016x} T {}\n", name.replace(' ', "_")));
        }
        text
    }
}
