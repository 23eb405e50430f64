//! Update planning: given which ops trace which sites, what each changed
//! site must become. The registry (`crate::registry`) applies the plan;
//! this module only decides, with no patching, no pointers and no locks, so
//! it is unit tested on the host.
//!
//! For each candidate site (one whose set of ops may have changed) the
//! plan says how many ops trace it, which trampoline it calls (the full-
//! registers one if any of its ops wants registers, none if no ops traces
//! it), the single ops its literal names, or the ops of a new per-site list
//! when several trace it and the list it has differs. A site that two
//! IPMODIFY ops would share refuses the whole plan.

use alloc::vec::Vec;

use crate::patch::bitmap::Bitmap;

/// One registered ops, as planning sees it.
pub struct PlanOps<'a> {
    /// The sites it traces (its filter minus its notrace).
    pub effective: &'a Bitmap,
    /// It wants every register (the REGS trampoline).
    pub regs: bool,
    /// It may change the instruction pointer.
    pub ipmodify: bool,
}

/// Which trampoline a site calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Call {
    /// The sparse save.
    Args,
    /// Every register.
    Regs,
}

/// What one site must become.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SitePlan {
    /// The site (its index in the site table).
    pub index: usize,
    /// The trampoline it calls; `None` when no ops traces it.
    pub call: Option<Call>,
    /// How many ops trace it.
    pub count: usize,
    /// The ops its literal names, when exactly one traces it.
    pub single: Option<usize>,
    /// With several ops: the new list's ops, newest first (as Linux's ops
    /// list runs them), when the site's current list differs; `None` keeps
    /// the current list.
    pub new_list: Option<Vec<usize>>,
    /// An IPMODIFY ops traces it.
    pub ipmodify: bool,
}

/// Two IPMODIFY ops would trace this site.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IpModifyConflict {
    pub index: usize,
}

/// Plans every candidate site. `ops` are the registered ops in registration
/// order; with `enabled` false (`ftrace_enabled` off) no site is traced,
/// though conflicts still count every registered ops (turning tracing back
/// on must not find one). `failed(index)`: the site is out of service and
/// left alone. `list_is(index, ops)`: the site's current list holds exactly
/// these ops, in this order.
pub fn plan(
    candidates: &Bitmap,
    ops: &[PlanOps],
    enabled: bool,
    failed: impl Fn(usize) -> bool,
    list_is: impl Fn(usize, &[usize]) -> bool,
) -> Result<Vec<SitePlan>, IpModifyConflict> {
    let mut plan = Vec::with_capacity(candidates.count());
    for index in candidates.iter_ones() {
        if failed(index) {
            continue;
        }
        let tracing = |i: &usize| ops[*i].effective.get(index);
        let ipmodify = (0..ops.len()).filter(tracing).filter(|&i| ops[i].ipmodify).count();
        if ipmodify > 1 {
            return Err(IpModifyConflict { index });
        }
        // One pass for the counts: most sites have one ops or none, and
        // those need no list (and no allocation) at all.
        let (mut count, mut regs, mut single) = (0, false, None);
        if enabled {
            for i in (0..ops.len()).filter(tracing) {
                count += 1;
                regs |= ops[i].regs;
                single.get_or_insert(i);
            }
        }
        let new_list = (count > 1)
            .then(|| (0..ops.len()).rev().filter(tracing).collect::<Vec<usize>>())
            .filter(|list| !list_is(index, list));
        plan.push(SitePlan {
            index,
            call: (count > 0).then_some(if regs { Call::Regs } else { Call::Args }),
            count,
            single: single.filter(|_| count == 1),
            new_list,
            ipmodify: ipmodify == 1 && count > 0,
        });
    }
    Ok(plan)
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    fn bits(len: usize, ones: &[usize]) -> Bitmap {
        let mut map = Bitmap::new(len);
        for &one in ones {
            map.set(one);
        }
        map
    }

    fn plain(effective: &Bitmap) -> PlanOps<'_> {
        PlanOps { effective, regs: false, ipmodify: false }
    }

    const NO_LIST: fn(usize, &[usize]) -> bool = |_, _| false;

    #[test]
    fn one_ops_per_site_needs_no_list() {
        let a = bits(4, &[0, 1]);
        let plan = plan(&bits(4, &[0, 1, 2]), &[plain(&a)], true, |_| false, NO_LIST).unwrap();
        assert_eq!(plan.len(), 3);
        assert_eq!(
            plan[0],
            SitePlan { index: 0, call: Some(Call::Args), count: 1, single: Some(0), new_list: None, ipmodify: false }
        );
        assert_eq!(plan[2], SitePlan { index: 2, call: None, count: 0, single: None, new_list: None, ipmodify: false });
    }

    #[test]
    fn several_ops_get_a_list_newest_first_unless_it_is_there() {
        let (a, b, c) = (bits(3, &[0, 1]), bits(3, &[1]), bits(3, &[1, 2]));
        let ops = [plain(&a), plain(&b), plain(&c)];
        let fresh = plan(&bits(3, &[1]), &ops, true, |_| false, NO_LIST).unwrap();
        assert_eq!(fresh[0].count, 3);
        assert_eq!(fresh[0].single, None);
        assert_eq!(fresh[0].new_list, Some(vec![2, 1, 0]));
        let kept = plan(&bits(3, &[1]), &ops, true, |_| false, |index, list| index == 1 && list == [2, 1, 0]).unwrap();
        assert_eq!(kept[0].new_list, None, "the site already has that list");
    }

    #[test]
    fn any_ops_wanting_registers_makes_the_site_regs() {
        let (a, b) = (bits(2, &[0, 1]), bits(2, &[1]));
        let ops = [plain(&a), PlanOps { effective: &b, regs: true, ipmodify: false }];
        let plan = plan(&bits(2, &[0, 1]), &ops, true, |_| false, NO_LIST).unwrap();
        assert_eq!((plan[0].call, plan[1].call), (Some(Call::Args), Some(Call::Regs)));
    }

    #[test]
    fn two_ipmodify_ops_on_a_site_refuse_the_plan_even_with_tracing_off() {
        let (a, b) = (bits(3, &[0, 2]), bits(3, &[2]));
        let ops =
            [PlanOps { effective: &a, regs: false, ipmodify: true }, PlanOps { effective: &b, regs: false, ipmodify: true }];
        assert_eq!(plan(&bits(3, &[0, 2]), &ops, true, |_| false, NO_LIST), Err(IpModifyConflict { index: 2 }));
        assert_eq!(plan(&bits(3, &[0, 2]), &ops, false, |_| false, NO_LIST), Err(IpModifyConflict { index: 2 }));
        let one = plan(&bits(3, &[0]), &ops, true, |_| false, NO_LIST).unwrap();
        assert!(one[0].ipmodify);
    }

    #[test]
    fn tracing_off_plans_every_site_empty_and_failed_sites_are_skipped() {
        let a = bits(3, &[0, 1, 2]);
        let off = plan(&bits(3, &[0, 1, 2]), &[plain(&a)], false, |_| false, NO_LIST).unwrap();
        assert!(off.iter().all(|site| site.call.is_none() && site.count == 0));
        let some = plan(&bits(3, &[0, 1, 2]), &[plain(&a)], true, |index| index == 1, NO_LIST).unwrap();
        assert_eq!(some.iter().map(|site| site.index).collect::<Vec<_>>(), [0, 2]);
    }
}
