//! A page of history costs a bounded walk on both stores: with no time
//! budget at all, every page reads at most `rows` jobs in its order, comes
//! back short with a cursor when it found fewer matches than asked, and
//! paging on through those cursors finds every match exactly once, in
//! order, in either order. With time to spare, a page is read whole.

mod common;

use std::time::Duration;
use taskyard::bench::seed::{seed, seed_postgres, SeedPlan};
use taskyard::protocol::JobId;
use taskyard::scheduler::OrderKey;
use taskyard::store::postgres::{PgTarget, PostgresReader};
use taskyard::store::{JobReader, PageFilter, ReadBudget, StoredJobReader};

const JOBS: u64 = 3_000;
const STRETCH: u64 = 500;
/// Rows a page shows; the coordinator asks for one more, as here.
const PAGE: usize = 10;
/// The rare task type: every 97th job.
const RARE: &str = "rare";

fn plan() -> SeedPlan {
    SeedPlan {
        finished: JOBS,
        active: 0,
        keyed: false,
        finished_from: 1_700_000_000_000,
        task_type: "echo".into(),
    }
}

const MAKE_RARE: &str = "UPDATE jobs SET task_type = 'rare' WHERE sequence % 97 = 0";

/// Every page of `filter` as the coordinator shows them: (ids shown,
/// whether the page was short with a cursor, the cursor).
fn pages(
    reader: &mut dyn StoredJobReader,
    filter: &PageFilter,
    budget: &ReadBudget,
) -> Vec<(Vec<JobId>, bool, Option<OrderKey>)> {
    let mut out = Vec::new();
    let mut cursor = None;
    loop {
        let asked = PageFilter {
            before: cursor,
            limit: PAGE + 1,
            ..filter.clone()
        };
        let walked = reader.summaries(&asked, Some(budget)).expect("page");
        let more = walked.rows.len() > PAGE;
        let shown: Vec<_> = walked.rows.iter().take(PAGE).map(|s| &s.job).collect();
        let next = match more {
            true => shown.last().map(|job| job.order_key()),
            false => walked.stopped_at,
        };
        let short = !more && next.is_some();
        out.push((shown.iter().map(|job| job.id).collect(), short, next));
        assert!(out.len() < 1_000, "paging never ends");
        match next {
            Some(key) => cursor = Some(key),
            None => return out,
        }
    }
}

/// The order keys of every job, in `filter`'s order (no budget).
fn all_keys(reader: &mut dyn StoredJobReader, oldest_first: bool) -> Vec<OrderKey> {
    let everything = PageFilter {
        limit: JOBS as usize + 1,
        oldest_first,
        ..PageFilter::default()
    };
    let budget = ReadBudget {
        time: Duration::from_secs(60),
        rows: JOBS,
    };
    let walked = reader.summaries(&everything, Some(&budget)).expect("all");
    assert_eq!(walked.stopped_at, None);
    walked.rows.iter().map(|s| s.job.order_key()).collect()
}

fn check(reader: &mut dyn StoredJobReader) {
    let tight = ReadBudget {
        time: Duration::ZERO,
        rows: STRETCH,
    };
    for oldest_first in [false, true] {
        let keys = all_keys(reader, oldest_first);
        let rare = PageFilter {
            task_type: Some(RARE.into()),
            oldest_first,
            ..PageFilter::default()
        };
        // Unbudgeted, the rare jobs in order.
        let roomy = ReadBudget {
            time: Duration::from_secs(60),
            rows: STRETCH,
        };
        let whole = reader
            .summaries(
                &PageFilter {
                    limit: JOBS as usize,
                    ..rare.clone()
                },
                Some(&roomy),
            )
            .expect("whole");
        assert_eq!(whole.stopped_at, None, "time to spare: read whole");
        let expected: Vec<JobId> = whole.rows.iter().map(|s| s.job.id).collect();
        assert_eq!(expected.len(), (JOBS / 97) as usize);

        let walked = pages(reader, &rare, &tight);
        let found: Vec<JobId> = walked.iter().flat_map(|(ids, _, _)| ids.clone()).collect();
        assert_eq!(
            found, expected,
            "oldest_first {oldest_first}: every match once, in order"
        );
        assert!(
            walked
                .iter()
                .any(|(ids, short, _)| *short && ids.len() < PAGE),
            "some pages came back short with a cursor"
        );
        // Each short page's cursor lies exactly STRETCH jobs after the
        // previous cursor: the walk read no more than its budget.
        let mut previous = None::<OrderKey>;
        for (_, short, next) in &walked {
            if let (true, Some(next)) = (short, next) {
                let from = previous.map_or(0, |key| position(&keys, key) + 1);
                assert_eq!(position(&keys, *next) + 1 - from, STRETCH as usize);
            }
            previous = *next;
        }

        // A filter nothing matches ends after JOBS / STRETCH short pages.
        let none = PageFilter {
            task_type: Some("nothing".into()),
            oldest_first,
            ..PageFilter::default()
        };
        let walked = pages(reader, &none, &tight);
        assert!(walked.iter().all(|(ids, _, _)| ids.is_empty()));
        assert_eq!(walked.len() as u64, JOBS / STRETCH);
    }
}

fn position(keys: &[OrderKey], key: OrderKey) -> usize {
    keys.iter()
        .position(|k| *k == key)
        .expect("the cursor is a job's order key")
}

#[test]
fn sqlite_pages_walk_a_bounded_stretch_when_out_of_time() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("t.db");
    seed(&path, &plan()).expect("seed");
    common::db::open(&path)
        .execute(MAKE_RARE, [])
        .expect("make some jobs rare");
    let mut reader = JobReader::open(&path).expect("reader");
    check(&mut reader);

    // Out of time while reading: SQLite's progress handler stops the
    // read of all 3,000 rows within a thousand instructions, and the
    // page then holds the first stretch.
    let keys = all_keys(&mut reader, false);
    let everything = PageFilter {
        limit: JOBS as usize + 1,
        ..PageFilter::default()
    };
    let budget = ReadBudget {
        time: Duration::from_nanos(1),
        rows: STRETCH,
    };
    let walked = reader.summaries(&everything, Some(&budget)).expect("page");
    assert_eq!(walked.rows.len(), STRETCH as usize);
    assert_eq!(walked.stopped_at, Some(keys[STRETCH as usize - 1]));
}

#[test]
fn postgres_pages_walk_a_bounded_stretch_when_out_of_time() {
    let Some(pg) = common::postgres::start() else {
        return;
    };
    seed_postgres(&pg.url(), &plan()).expect("seed");
    let target = PgTarget::parse(&pg.url()).expect("url");
    let mut client = target.connect().expect("connect");
    client
        .batch_execute(&format!(
            "{}; ANALYZE taskyard.jobs;",
            MAKE_RARE.replace("UPDATE jobs", "UPDATE taskyard.jobs")
        ))
        .expect("make some jobs rare");
    let mut reader = PostgresReader::open(target).expect("reader");
    check(&mut reader);
}

/// An id prefix shared by thousands of ids (UUID v7 ids share their first
/// digits for a while) walks the listing order, and pages as any page.
#[test]
fn a_dense_prefix_pages_newest_first_like_any_page() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("t.db");
    let plan = SeedPlan {
        finished: 6_000,
        active: 0,
        keyed: false,
        finished_from: 1_700_000_000_000,
        task_type: "echo".into(),
    };
    seed(&path, &plan).expect("seed");
    let reader = JobReader::open(&path).expect("reader");
    let everything = PageFilter {
        limit: 100,
        ..PageFilter::default()
    };
    let newest = reader.summaries_unbudgeted(&everything).expect("page");
    let prefix = newest[0].job.id.to_string()[..4].to_string();
    let by_prefix = PageFilter {
        id_prefix: Some(taskyard::protocol::IdPrefix::parse(&prefix).expect("prefix")),
        ..everything.clone()
    };
    assert!(
        reader.prefix_is_dense(&by_prefix).expect("probe"),
        "6,000 ids share {prefix}"
    );
    let ids = |page: Vec<taskyard::store::StoredSummary>| -> Vec<JobId> {
        page.into_iter().map(|s| s.job.id).collect()
    };
    let expected: Vec<JobId> = ids(newest)
        .into_iter()
        .filter(|id| id.to_string().starts_with(&prefix))
        .collect();
    assert_eq!(
        ids(reader.summaries_unbudgeted(&by_prefix).expect("page")),
        expected
    );
}
