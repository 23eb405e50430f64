//! The function profiler's counting and printing (`trace_stat/functionN`),
//! apart from the kernel glue (`crate::profile::function`) so the host tests it.
//!
//! A [`ProfileTable`] counts, per function, its calls and the time spent in
//! them (with children, as Linux's default `graph-time` does) and the
//! squares of those times, for a variance. The traced path updates it
//! without a lock or an allocation: open addressing over a fixed array,
//! a function claiming its slot with one compare-and-swap; counters are
//! relaxed atomics (a return may land on another CPU's table, which is
//! fine: every update is an atomic add). A full table counts what it could
//! not place in [`ProfileTable::missed`] instead.

use alloc::vec::Vec;
use core::fmt::{self, Write};
use core::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use crate::output::graph::write_graph_duration;

/// One function's counters.
struct Slot {
    /// The function's address; 0 while free.
    ip: AtomicUsize,
    hits: AtomicU64,
    /// Nanoseconds, and their squares.
    time: AtomicU64,
    time_squared: AtomicU64,
}

/// What one function's counters say.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FunctionStat {
    pub ip: usize,
    pub hits: u64,
    pub time_ns: u64,
    pub time_squared: u64,
}

/// A fixed-size table of per-function counters. See the module
/// documentation.
pub struct ProfileTable {
    slots: Vec<Slot>,
    missed: AtomicU64,
}

impl ProfileTable {
    /// A table for up to `capacity` functions (rounded up to a power of
    /// two); `None` if the heap cannot hold it.
    pub fn try_new(capacity: usize) -> Option<ProfileTable> {
        let capacity = capacity.max(2).next_power_of_two();
        let mut slots = Vec::new();
        slots.try_reserve_exact(capacity).ok()?;
        slots.extend((0..capacity).map(|_| Slot {
            ip: AtomicUsize::new(0),
            hits: AtomicU64::new(0),
            time: AtomicU64::new(0),
            time_squared: AtomicU64::new(0),
        }));
        Some(ProfileTable { slots, missed: AtomicU64::new(0) })
    }

    /// The slot of `ip`, claimed if it has none; `None` when full.
    #[inline]
    fn slot(&self, ip: usize) -> Option<&Slot> {
        let mask = self.slots.len() - 1;
        // Fibonacci hashing spreads functions 16 bytes apart over the table.
        let mut index = (ip.wrapping_mul(0x9e37_79b9_7f4a_7c15_u64 as usize) >> 16) & mask;
        for _ in 0..self.slots.len() {
            let slot = &self.slots[index];
            match slot.ip.load(Ordering::Acquire) {
                found if found == ip => return Some(slot),
                0 => match slot.ip.compare_exchange(0, ip, Ordering::AcqRel, Ordering::Acquire) {
                    Ok(_) => return Some(slot),
                    Err(found) if found == ip => return Some(slot),
                    Err(_) => {}
                },
                _ => {}
            }
            index = (index + 1) & mask;
        }
        None
    }

    /// Counts a call of `ip`.
    #[inline]
    pub fn hit(&self, ip: usize) {
        match self.slot(ip) {
            Some(slot) => {
                slot.hits.fetch_add(1, Ordering::Relaxed);
            }
            None => {
                self.missed.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Adds a finished call of `ip` that took `ns` nanoseconds.
    #[inline]
    pub fn add_time(&self, ip: usize, ns: u64) {
        if let Some(slot) = self.slot(ip) {
            slot.time.fetch_add(ns, Ordering::Relaxed);
            slot.time_squared.fetch_add(ns.saturating_mul(ns), Ordering::Relaxed);
        }
    }

    /// Forgets every count (while no callback updates the table, or
    /// accepting that one in flight lands in the new counts).
    pub fn reset(&self) {
        for slot in &self.slots {
            slot.hits.store(0, Ordering::Relaxed);
            slot.time.store(0, Ordering::Relaxed);
            slot.time_squared.store(0, Ordering::Relaxed);
            slot.ip.store(0, Ordering::Release);
        }
        self.missed.store(0, Ordering::Relaxed);
    }

    /// Calls the table had no room for.
    pub fn missed(&self) -> u64 {
        self.missed.load(Ordering::Relaxed)
    }

    /// Every function with calls, the most time first (then the most hits).
    pub fn stats(&self) -> Vec<FunctionStat> {
        let mut stats: Vec<FunctionStat> = self
            .slots
            .iter()
            .filter(|slot| slot.ip.load(Ordering::Acquire) != 0)
            .map(|slot| FunctionStat {
                ip: slot.ip.load(Ordering::Relaxed),
                hits: slot.hits.load(Ordering::Relaxed),
                time_ns: slot.time.load(Ordering::Relaxed),
                time_squared: slot.time_squared.load(Ordering::Relaxed),
            })
            .filter(|stat| stat.hits > 0)
            .collect();
        stats.sort_by(|a, b| b.time_ns.cmp(&a.time_ns).then(b.hits.cmp(&a.hits)).then(a.ip.cmp(&b.ip)));
        stats
    }
}

/// Prints `stats` as Linux's `trace_stat/functionN`: a header, then one
/// line per function (name cut to 30 characters, hits, total time,
/// average, variance s^2 in the way Linux computes it, each time as the
/// graph tracer prints a duration). With `thresh_ns` (`tracing_thresh`)
/// set, a function whose average is below it is left out, as in Linux.
pub fn write_stats<'a>(
    out: &mut dyn Write,
    stats: &[FunctionStat],
    thresh_ns: u64,
    name_of: &dyn Fn(usize) -> Option<&'a str>,
) -> fmt::Result {
    writeln!(out, "  Function                               Hit    Time            Avg             s^2")?;
    writeln!(out, "  --------                               ---    ----            ---             ---")?;
    for stat in stats {
        let avg = stat.time_ns / stat.hits.max(1);
        if thresh_ns != 0 && avg < thresh_ns {
            continue;
        }
        match name_of(stat.ip) {
            Some(name) => write!(out, "  {name:<30.30}  {:>10}", stat.hits)?,
            None => write!(out, "  {:<30.30}  {:>10}", alloc::format!("{:#x}", stat.ip), stat.hits)?,
        }
        // Linux: (n * sum(t^2) - sum(t)^2) / (n * (n - 1)) in ns^2, printed
        // as a duration of a thousandth of that: us^2 shown as "us".
        let variance = if stat.hits <= 1 {
            0
        } else {
            let n = u128::from(stat.hits);
            let spread = (n * u128::from(stat.time_squared)).saturating_sub(u128::from(stat.time_ns) * u128::from(stat.time_ns));
            (spread / (n * (n - 1))) as u64
        };
        out.write_str("    ")?;
        write_graph_duration(out, stat.time_ns)?;
        out.write_str("    ")?;
        write_graph_duration(out, avg)?;
        out.write_str("    ")?;
        write_graph_duration(out, variance / 1000)?;
        writeln!(out)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::String;

    #[test]
    fn counts_hits_and_times_per_function() {
        let table = ProfileTable::try_new(8).unwrap();
        for _ in 0..3 {
            table.hit(0x1000);
        }
        table.add_time(0x1000, 1000);
        table.add_time(0x1000, 2000);
        table.add_time(0x1000, 3000);
        table.hit(0x2000);
        table.add_time(0x2000, 50_000);
        let stats = table.stats();
        assert_eq!(stats.len(), 2);
        assert_eq!(stats[0], FunctionStat { ip: 0x2000, hits: 1, time_ns: 50_000, time_squared: 2_500_000_000 });
        assert_eq!(stats[1].hits, 3);
        assert_eq!(stats[1].time_ns, 6000);
    }

    #[test]
    fn a_full_table_counts_what_it_missed() {
        let table = ProfileTable::try_new(2).unwrap();
        for ip in 1..=4 {
            table.hit(ip * 16);
        }
        assert_eq!(table.stats().len(), 2);
        assert_eq!(table.missed(), 2);
    }

    #[test]
    fn prints_linux_columns() {
        let stats = [FunctionStat { ip: 0x1000, hits: 3, time_ns: 6000, time_squared: 14_000_000 }];
        let mut out = String::new();
        write_stats(&mut out, &stats, 0, &|ip| (ip == 0x1000).then_some("kernel::workload::fib")).unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[0], "  Function                               Hit    Time            Avg             s^2");
        assert_eq!(lines[1], "  --------                               ---    ----            ---             ---");
        // Times 1, 2, 3 us: total 6, average 2, variance 1 us^2; each
        // duration padded to Linux's width after its " us ".
        assert_eq!(lines[2], "  kernel::workload::fib                    3    6.000 us        2.000 us        1.000 us    ");
    }

    #[test]
    fn cuts_names_to_30_and_prints_durations_as_the_graph_does() {
        let long = "kernel::workload::a_function_with_a_long_name";
        // 12.345678 ms in 1 call; 1234.567891 s in 2 calls (7 digits of
        // microseconds and more: no decimals).
        let stats = [
            FunctionStat { ip: 0x1000, hits: 1, time_ns: 12_345_678, time_squared: 0 },
            FunctionStat { ip: 0x2000, hits: 2, time_ns: 1_234_567_891_000, time_squared: 0 },
        ];
        let mut out = String::new();
        write_stats(&mut out, &stats, 0, &|ip| (ip == 0x1000).then_some(long)).unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[2], "  kernel::workload::a_function_w           1    12345.67 us     12345.67 us     0.000 us    ");
        assert_eq!(lines[3], "  0x2000                                   2    1234567891 us     617283945 us     0.000 us    ");
    }

    #[test]
    fn tracing_thresh_leaves_out_functions_with_a_shorter_average() {
        let stats = [
            FunctionStat { ip: 0x1000, hits: 2, time_ns: 9_998, time_squared: 0 },
            FunctionStat { ip: 0x2000, hits: 2, time_ns: 10_000, time_squared: 0 },
        ];
        let names = |ip| Some(if ip == 0x1000 { "short" } else { "long" });
        let mut out = String::new();
        write_stats(&mut out, &stats, 5_000, &names).unwrap();
        let rows: Vec<&str> = out.lines().skip(2).collect();
        assert_eq!(rows.len(), 1, "{out}");
        assert!(rows[0].starts_with("  long "), "{out}");
        out.clear();
        write_stats(&mut out, &stats, 0, &names).unwrap();
        assert_eq!(out.lines().count(), 4, "0 is off: every function: {out}");
    }
}
