//! Numbers as C writes them, the way Linux's `kstrtoul(text, 0, ...)`
//! parses a function command's or a trigger's count, a hist size, a probe's
//! MAXACTIVE or offset: one reader for every place Linux reads base 0, so
//! `traceoff:0x10`, `size=0x800` and `+0x10(%sp)` mean the same everywhere.
//! (Files Linux reads in base 10, `buffer_size_kb` or `tracing_thresh`,
//! parse decimal.)

/// A count of actions that means "every one": a trigger's or a function
/// command's count with none given.
pub const UNLIMITED: u64 = u64::MAX;

/// A count (of a trigger or a function command), as [`c_ulong`] reads it;
/// the largest number means [`UNLIMITED`] here, so it is refused, not
/// misread.
pub fn c_count(text: &str) -> Option<u64> {
    c_ulong(text).filter(|&count| count != UNLIMITED)
}

/// An unsigned number: an optional `+`, then [`c_digits`].
pub fn c_ulong(text: &str) -> Option<u64> {
    c_digits(text.strip_prefix('+').unwrap_or(text))
}

/// An unsigned number with no sign: `0x` (or `0X`) hex, a leading `0`
/// octal, else decimal; digits only (no spaces), and it must fit 64 bits.
/// (For a caller that reads the sign itself.)
pub fn c_digits(text: &str) -> Option<u64> {
    let (digits, radix) = match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        Some(hex) => (hex, 16),
        None if text.len() > 1 && text.starts_with('0') => (&text[1..], 8),
        None => (text, 10),
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    u64::from_str_radix(digits, radix).ok()
}

/// A signed number: an optional `-`, then [`c_digits`], within 64 bits (as
/// Linux's `kstrtoll` reads a filter's number, and `proc_dointvec` a
/// sysctl's before its own range check).
pub fn c_long(text: &str) -> Option<i64> {
    let (negative, digits) = match text.strip_prefix('-') {
        Some(digits) => (true, digits),
        None => (false, text),
    };
    let magnitude = i128::from(c_digits(digits)?);
    i64::try_from(if negative { -magnitude } else { magnitude }).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_numbers_as_c_writes_them() {
        assert_eq!(c_ulong("16"), Some(16));
        assert_eq!(c_ulong("0x10"), Some(16));
        assert_eq!(c_ulong("0X1f"), Some(31));
        assert_eq!(c_ulong("020"), Some(16));
        assert_eq!(c_ulong("0"), Some(0));
        assert_eq!(c_ulong("18446744073709551615"), Some(u64::MAX));
        assert_eq!(c_ulong("+5"), Some(5), "one plus, as kstrtoul skips it");
        assert_eq!(c_ulong("+0x10"), Some(16));
        assert_eq!(c_digits("+5"), None, "no sign");
        for bad in ["", "0x", "++5", "+", "0+400", "-1", "08", "1a", " 1", "18446744073709551616", "0x-1"] {
            assert_eq!(c_ulong(bad), None, "{bad:?}");
        }
        assert_eq!(c_long("-0x10"), Some(-16));
        assert_eq!(c_long("-9223372036854775808"), Some(i64::MIN));
        assert_eq!(c_long("9223372036854775807"), Some(i64::MAX));
        for bad in ["9223372036854775808", "--1", "-", "+1", "-08"] {
            assert_eq!(c_long(bad), None, "{bad:?}");
        }
    }
}
