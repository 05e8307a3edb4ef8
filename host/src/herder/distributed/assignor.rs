//! The leader's assignment of connectors and tasks to workers: incremental
//! and cooperative, after Kafka Connect's (KIP-415). Each member keeps what
//! it runs unless that must move; work moves in two generations (revoked
//! from one member in the first, given to another in the second), so that
//! no unit of work is ever assigned to two live members at once, and a
//! worker that joins stops nothing but what it takes over.

use super::protocol::WorkSet;
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

pub struct Assignor {
    /// `scheduled.rebalance.max.delay.ms`: how long the work of a member
    /// that left is held back for it to come back.
    delay: Duration,
    /// What this leader assigned last, by member.
    previous: BTreeMap<String, WorkSet>,
    /// Work of departed members held back, and since when.
    held: Option<(Instant, WorkSet)>,
}

/// The assignment of one generation.
#[derive(Debug, Default)]
pub struct Plan {
    pub owned: BTreeMap<String, WorkSet>,
    /// Set while work is held back: everyone joins again after this long.
    pub rejoin_after: Option<Duration>,
}

impl Assignor {
    pub fn new(delay: Duration) -> Self {
        Assignor { delay, previous: BTreeMap::new(), held: None }
    }

    /// Assigns `work` (every connector and task there is) among `members`
    /// (each with what it says it runs).
    pub fn assign(&mut self, now: Instant, work: &WorkSet, members: &BTreeMap<String, WorkSet>) -> Plan {
        let mut plan = Plan::default();
        if members.is_empty() {
            return plan;
        }
        // 1. Each keeps what it runs and still exists; a unit claimed by two
        //    (one lost its membership and came back) stays with the one it
        //    was last given to, or the first.
        let mut owner: BTreeMap<Unit, String> = BTreeMap::new();
        for (member, owned) in members {
            for unit in units(owned).filter(|u| u.is_in(work)) {
                let given_here = self.previous.get(member).is_some_and(|p| unit.is_in(p));
                match owner.get(&unit) {
                    Some(_) if !given_here => {}
                    _ => {
                        owner.insert(unit, member.clone());
                    }
                }
            }
        }
        // 2. Work of members that left is held back for a while, in case
        //    they come back (a rolling restart), unless nothing is to wait.
        let unowned: BTreeSet<Unit> = units(work).filter(|u| !owner.contains_key(u)).collect();
        let departed: BTreeSet<Unit> = self
            .previous
            .iter()
            .filter(|(member, _)| !members.contains_key(*member))
            .flat_map(|(_, owned)| units(owned))
            .filter(|u| unowned.contains(u))
            .collect();
        let previously_held: BTreeSet<Unit> = self.held.iter().flat_map(|(_, w)| units(w)).collect();
        let waiting: BTreeSet<Unit> =
            departed.union(&previously_held).filter(|u| unowned.contains(u)).cloned().collect();
        let since = self.held.as_ref().map_or(now, |(since, _)| *since);
        let mut held = BTreeSet::new();
        self.held = None;
        if !self.delay.is_zero() && !waiting.is_empty() && now < since + self.delay {
            plan.rejoin_after = Some(since + self.delay - now);
            self.held = Some((since, to_work(&waiting)));
            held = waiting;
        }
        // 3. The rest goes to the least loaded, connectors and tasks counted
        //    apart. Then each member's share is set (the total over the
        //    members, the most loaded getting the remainder) and whoever has
        //    more gives the excess back, to be given out in the next
        //    generation.
        for kind in [Kind::Connector, Kind::Task] {
            let mine = |member: &String, owner: &BTreeMap<Unit, String>| -> Vec<Unit> {
                owner.iter().filter(|(u, m)| u.kind() == kind && *m == member).map(|(u, _)| u.clone()).collect()
            };
            for unit in unowned.iter().filter(|u| u.kind() == kind && !held.contains(*u)) {
                let least = members.keys().min_by_key(|m| (mine(m, &owner).len(), *m)).expect("not empty").clone();
                owner.insert(unit.clone(), least);
            }
            let total = owner.keys().filter(|u| u.kind() == kind).count();
            let (base, remainder) = (total / members.len(), total % members.len());
            let mut by_load: Vec<(usize, &String)> = members.keys().map(|m| (mine(m, &owner).len(), m)).collect();
            by_load.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(b.1)));
            for (rank, (_, member)) in by_load.into_iter().enumerate() {
                let share = base + usize::from(rank < remainder);
                for unit in mine(member, &owner).into_iter().skip(share) {
                    owner.remove(&unit);
                }
            }
        }
        for member in members.keys() {
            let mine: BTreeSet<Unit> = owner.iter().filter(|(_, m)| *m == member).map(|(u, _)| u.clone()).collect();
            plan.owned.insert(member.clone(), to_work(&mine));
        }
        self.previous = plan.owned.clone();
        plan
    }
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Unit {
    Connector(String),
    Task(String, u32),
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Connector,
    Task,
}

impl Unit {
    fn kind(&self) -> Kind {
        match self {
            Unit::Connector(_) => Kind::Connector,
            Unit::Task(..) => Kind::Task,
        }
    }

    fn is_in(&self, work: &WorkSet) -> bool {
        match self {
            Unit::Connector(name) => work.connectors.contains(name),
            Unit::Task(name, id) => work.tasks.contains(&(name.clone(), *id)),
        }
    }
}

fn units(work: &WorkSet) -> impl Iterator<Item = Unit> + '_ {
    work.connectors
        .iter()
        .map(|c| Unit::Connector(c.clone()))
        .chain(work.tasks.iter().map(|(c, t)| Unit::Task(c.clone(), *t)))
}

fn to_work(units: &BTreeSet<Unit>) -> WorkSet {
    let mut work = WorkSet::default();
    for unit in units {
        match unit {
            Unit::Connector(name) => {
                work.connectors.insert(name.clone());
            }
            Unit::Task(name, id) => {
                work.tasks.insert((name.clone(), *id));
            }
        }
    }
    work
}

#[cfg(test)]
mod tests {
    use super::*;

    fn work(connectors: &[&str], tasks: &[(&str, u32)]) -> WorkSet {
        WorkSet {
            connectors: connectors.iter().map(|c| c.to_string()).collect(),
            tasks: tasks.iter().map(|(c, t)| (c.to_string(), *t)).collect(),
        }
    }

    fn members(owned: &[(&str, WorkSet)]) -> BTreeMap<String, WorkSet> {
        owned.iter().map(|(m, w)| (m.to_string(), w.clone())).collect()
    }

    /// Every unit of `all` is owned by exactly one member.
    fn assert_partition(plan: &Plan, all: &WorkSet) {
        let mut seen = WorkSet::default();
        for owned in plan.owned.values() {
            for c in &owned.connectors {
                assert!(seen.connectors.insert(c.clone()), "{c} assigned twice: {plan:?}");
            }
            for t in &owned.tasks {
                assert!(seen.tasks.insert(t.clone()), "{t:?} assigned twice: {plan:?}");
            }
        }
        assert_eq!(&seen, all, "everything assigned");
    }

    fn counts(plan: &Plan) -> Vec<usize> {
        plan.owned.values().map(|w| w.tasks.len()).collect()
    }

    #[test]
    fn new_work_is_spread_and_a_joiner_takes_work_in_two_generations_while_the_rest_keeps_running() {
        let now = Instant::now();
        let mut assignor = Assignor::new(Duration::ZERO);
        let all = work(&["c"], &[("c", 0), ("c", 1), ("c", 2), ("c", 3)]);
        let plan = assignor.assign(now, &all, &members(&[("a", WorkSet::default()), ("b", WorkSet::default())]));
        assert_partition(&plan, &all);
        assert_eq!(counts(&plan), [2, 2]);
        let (a, b) = (plan.owned["a"].clone(), plan.owned["b"].clone());
        // c joins: a and b each give one task back and keep the rest.
        let plan =
            assignor.assign(now, &all, &members(&[("a", a.clone()), ("b", b.clone()), ("c", WorkSet::default())]));
        assert!(plan.owned["a"].is_subset(&a) && plan.owned["b"].is_subset(&b), "nothing moves between a and b");
        assert_eq!(plan.owned["c"], WorkSet::default(), "nothing is given while it is revoked");
        let size = |w: &WorkSet| w.connectors.len() + w.tasks.len();
        let revoked = size(&a) + size(&b) - size(&plan.owned["a"]) - size(&plan.owned["b"]);
        assert_eq!(revoked, 1, "of 4 tasks over 3 workers, one of a's or b's 2 goes back");
        // The next generation gives the revoked work to c.
        let owned: Vec<(&str, WorkSet)> = plan.owned.iter().map(|(m, w)| (m.as_str(), w.clone())).collect();
        let plan2 = assignor.assign(now, &all, &members(&owned));
        assert_partition(&plan2, &all);
        let mut loads = counts(&plan2);
        loads.sort();
        assert_eq!(loads, [1, 1, 2]);
        assert!(!plan2.owned["c"].tasks.is_empty());
    }

    #[test]
    fn a_departed_members_work_waits_out_the_delay_then_moves() {
        let start = Instant::now();
        let delay = Duration::from_secs(10);
        let mut assignor = Assignor::new(delay);
        let all = work(&[], &[("c", 0), ("c", 1), ("c", 2)]);
        let three = members(&[("a", WorkSet::default()), ("b", WorkSet::default()), ("c", WorkSet::default())]);
        let plan = assignor.assign(start, &all, &three);
        assert_eq!(counts(&plan), [1, 1, 1]);
        let (a, b) = (plan.owned["a"].clone(), plan.owned["b"].clone());
        let two = members(&[("a", a.clone()), ("b", b.clone())]);
        let held = assignor.assign(start + Duration::from_secs(3), &all, &two);
        assert_eq!(held.owned["a"], a);
        assert_eq!(held.owned["b"], b, "c's task is held back");
        assert_eq!(held.rejoin_after, Some(delay), "the delay runs from when the loss is seen");
        let still = assignor.assign(start + Duration::from_secs(10), &all, &two);
        assert_eq!((still.owned["a"].clone(), still.owned["b"].clone()), (a, b));
        assert_eq!(still.rejoin_after, Some(Duration::from_secs(3)));
        let moved = assignor.assign(start + Duration::from_secs(13), &all, &two);
        assert_partition(&moved, &all);
        assert_eq!(moved.rejoin_after, None);
    }

    #[test]
    fn with_no_delay_a_departed_members_work_moves_at_once_and_deleted_work_is_revoked() {
        let now = Instant::now();
        let mut assignor = Assignor::new(Duration::ZERO);
        let all = work(&["x"], &[("x", 0), ("x", 1)]);
        let plan = assignor.assign(now, &all, &members(&[("a", WorkSet::default()), ("b", WorkSet::default())]));
        let a = plan.owned["a"].clone();
        let plan = assignor.assign(now, &all, &members(&[("a", a.clone())]));
        assert_partition(&plan, &all);
        let fewer = work(&["x"], &[("x", 0)]);
        let plan = assignor.assign(now, &fewer, &members(&[("a", plan.owned["a"].clone())]));
        assert_partition(&plan, &fewer);
    }

    #[test]
    fn work_claimed_by_two_members_stays_with_the_one_it_was_given_to() {
        let now = Instant::now();
        let mut assignor = Assignor::new(Duration::ZERO);
        let all = work(&[], &[("c", 0), ("c", 1)]);
        let plan = assignor.assign(now, &all, &members(&[("a", WorkSet::default()), ("b", WorkSet::default())]));
        let b = plan.owned["b"].clone();
        // a lost its membership and rejoined as "a2" claiming everything.
        let plan = assignor.assign(now, &all, &members(&[("a2", all.clone()), ("b", b.clone())]));
        assert_partition(&plan, &all);
        assert_eq!(plan.owned["b"], b);
    }
}
