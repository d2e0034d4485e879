use super::*;
use taskyard_protocol::LeaderAddresses;

const TTL: Duration = Duration::from_millis(3000);

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn keeper(t0: Instant) -> LeaseKeeper {
    LeaseKeeper::new(LeaseTiming::from_ttl(TTL), t0)
}

/// A keeper that acquired epoch 7 with an acquisition started at `t0`.
fn leader(t0: Instant) -> LeaseKeeper {
    let mut k = keeper(t0);
    assert_eq!(k.due(t0), Due::Poll);
    assert!(k.polled(t0, None));
    assert_eq!(k.acquired(t0, t0 + ms(5), Some(7)), Some(7));
    k
}

fn record(node: &str, expires_in_ms: i64) -> LeaderRecord {
    LeaderRecord {
        leader: LeaderAddresses {
            node: node.into(),
            epoch: 3,
            ..LeaderAddresses::default()
        },
        expires_in_ms,
        renewed_ms_ago: 0,
    }
}

#[test]
fn timings_follow_the_ttl() {
    let t = LeaseTiming::from_ttl(ms(10_000));
    assert_eq!(t.poll_every.as_millis(), 3333);
    assert_eq!(t.retry_every, ms(1000));
    assert_eq!(t.margin, ms(2000));
    assert_eq!(t.trust(), ms(8000));
    assert_eq!(LeaseTiming::from_ttl(ms(100)).retry_every, MIN_RETRY);
}

#[test]
fn only_a_free_or_expired_lease_is_worth_acquiring() {
    assert!(lease_is_free(None));
    assert!(lease_is_free(Some(&record("", 5000))), "released");
    assert!(lease_is_free(Some(&record("a", 0))), "expired just now");
    assert!(lease_is_free(Some(&record("a", -10))));
    assert!(!lease_is_free(Some(&record("a", 1))));
}

#[test]
fn a_standby_polls_every_third_of_the_ttl() {
    let t0 = Instant::now();
    let mut k = keeper(t0);
    assert_eq!(k.due(t0), Due::Poll);
    assert!(!k.polled(t0, Some(&record("other", 2000))));
    assert_eq!(
        k.due(t0 + ms(999)),
        Due::Wait {
            until: t0 + ms(1000)
        }
    );
    assert_eq!(k.due(t0 + ms(1000)), Due::Poll);
    k.poll_failed(t0 + ms(1000));
    assert_eq!(
        k.due(t0 + ms(1500)),
        Due::Wait {
            until: t0 + ms(2000)
        }
    );
    assert_eq!(k.epoch(), None);
    assert!(!k.is_trusted(t0 + ms(1500)));
}

#[test]
fn a_notification_makes_the_standby_poll_at_once() {
    let t0 = Instant::now();
    let mut k = keeper(t0);
    k.polled(t0, Some(&record("other", 2000)));
    k.woken(t0 + ms(10));
    assert_eq!(k.due(t0 + ms(10)), Due::Poll);
}

#[test]
fn trust_runs_from_the_acquisitions_start_not_its_answer() {
    let t0 = Instant::now();
    let mut k = keeper(t0);
    k.polled(t0, None);
    assert_eq!(k.acquired(t0, t0 + ms(400), Some(2)), Some(2));
    assert_eq!(k.epoch(), Some(2));
    assert_eq!(k.trusted_until(), Some(t0 + ms(2400)));
    assert!(k.is_trusted(t0 + ms(2399)));
    assert!(!k.is_trusted(t0 + ms(2400)));
}

#[test]
fn an_acquisition_refused_or_answered_too_late_leaves_a_standby() {
    let t0 = Instant::now();
    let mut k = keeper(t0);
    assert_eq!(k.acquired(t0, t0 + ms(5), None), None);
    assert_eq!(k.epoch(), None);
    assert_eq!(
        k.acquired(t0, t0 + ms(2400), Some(4)),
        None,
        "no trust left"
    );
    assert_eq!(k.epoch(), None);
}

#[test]
fn a_leader_renews_every_third_of_the_ttl_from_each_renewals_start() {
    let t0 = Instant::now();
    let mut k = leader(t0);
    assert_eq!(
        k.due(t0 + ms(500)),
        Due::Wait {
            until: t0 + ms(1000)
        }
    );
    assert_eq!(k.due(t0 + ms(1000)), Due::Renew { epoch: 7 });
    let started = t0 + ms(1000);
    assert_eq!(
        k.renewed(started, started + ms(300), Renewal::Extended),
        None
    );
    assert_eq!(k.trusted_until(), Some(started + ms(2400)));
    assert_eq!(
        k.due(started + ms(300)),
        Due::Wait {
            until: started + ms(1000)
        }
    );
    assert_eq!(k.due(started + ms(1000)), Due::Renew { epoch: 7 });
}

#[test]
fn a_failed_renewal_is_retried_and_steps_down_when_the_trust_ends() {
    let t0 = Instant::now();
    let mut k = leader(t0);
    let mut now = t0 + ms(1000);
    while now < t0 + ms(2400) {
        assert_eq!(k.due(now), Due::Renew { epoch: 7 }, "at {:?}", now - t0);
        assert_eq!(k.renewed(now, now + ms(10), Renewal::Failed), None);
        now += ms(10);
        match k.due(now) {
            Due::Wait { until } => {
                assert!(until <= t0 + ms(2400), "never waits past the trust");
                assert_eq!(until, (now + ms(300)).min(t0 + ms(2400)));
                now = until;
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    let down = StepDown {
        epoch: 7,
        reason: StepDownReason::TrustEnded,
    };
    assert_eq!(k.due(now), Due::StepDown(down));
    assert_eq!(k.epoch(), None, "a standby now");
    assert_eq!(k.due(now), Due::Poll, "and it polls at once");
}

#[test]
fn a_failed_renewal_that_outlives_the_trust_steps_down_when_it_returns() {
    let t0 = Instant::now();
    let mut k = leader(t0);
    let started = t0 + ms(1000);
    let down = k.renewed(started, t0 + ms(2500), Renewal::Failed);
    assert_eq!(down.map(|d| d.reason), Some(StepDownReason::TrustEnded));
}

#[test]
fn a_successful_renewal_that_took_too_long_does_not_extend_past_its_start() {
    let t0 = Instant::now();
    let mut k = leader(t0);
    // Started at 1000: trusted until 3400, but it answered at 3500.
    let down = k.renewed(t0 + ms(1000), t0 + ms(3500), Renewal::Extended);
    assert_eq!(down.map(|d| d.reason), Some(StepDownReason::TrustEnded));
}

#[test]
fn a_refused_renewal_steps_down_at_once() {
    let t0 = Instant::now();
    let mut k = leader(t0);
    let down = k.renewed(t0 + ms(1000), t0 + ms(1001), Renewal::Refused);
    assert_eq!(
        down,
        Some(StepDown {
            epoch: 7,
            reason: StepDownReason::Refused
        })
    );
    assert_eq!(k.epoch(), None);
    assert!(!k.is_trusted(t0 + ms(1002)));
}

#[test]
fn a_fenced_commit_steps_down_at_once_and_only_a_leader_can() {
    let t0 = Instant::now();
    let mut k = leader(t0);
    let down = k.fenced(t0 + ms(10)).expect("was leading");
    assert_eq!(down.reason, StepDownReason::Fenced);
    assert_eq!(
        k.fenced(t0 + ms(11)),
        None,
        "a standby has nothing to give up"
    );
}

#[test]
fn an_older_renewals_late_answer_never_shortens_the_trust() {
    let t0 = Instant::now();
    let mut k = leader(t0);
    k.renewed(t0 + ms(1000), t0 + ms(1010), Renewal::Extended);
    k.renewed(t0 + ms(900), t0 + ms(1020), Renewal::Extended);
    assert_eq!(k.trusted_until(), Some(t0 + ms(3400)));
}

#[test]
fn outcomes_for_the_other_role_are_ignored() {
    let t0 = Instant::now();
    let mut k = keeper(t0);
    assert_eq!(k.renewed(t0, t0, Renewal::Refused), None);
    assert_eq!(k.epoch(), None);
    let mut l = leader(t0);
    assert!(
        !l.polled(t0 + ms(1), None),
        "a leader does not acquire again"
    );
    l.woken(t0 + ms(1));
    assert_eq!(
        l.due(t0 + ms(2)),
        Due::Wait {
            until: t0 + ms(1000)
        }
    );
    assert_eq!(
        l.acquired(t0, t0 + ms(3), Some(9)),
        Some(7),
        "keeps its epoch"
    );
}

#[test]
fn trust_that_ended_is_not_revived_by_a_renewal_that_started_in_time() {
    let t0 = Instant::now();
    let mut k = leader(t0);
    // Trusted until 2400; a renewal started at 2300 answers at 2450.
    let down = k.renewed(t0 + ms(2300), t0 + ms(2450), Renewal::Extended);
    assert_eq!(down.map(|d| d.reason), Some(StepDownReason::TrustEnded));
    assert_eq!(k.epoch(), None);
}
