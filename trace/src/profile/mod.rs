//! The function profiler (`function_profile_enabled`, `trace_stat/`): the
//! per-function counts and times, their tables and printing ([`stats`],
//! unit tested on the host), and the profiler that fills them from a
//! function-graph callback (`function`).

pub mod stats;

#[cfg(target_os = "none")]
pub mod function;
