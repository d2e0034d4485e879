//! Every filter a history page offers is served by an index in the
//! page's order, in either order and after a cursor: SQLite's own query
//! plan says so (a search of the index, no sort of the matching rows), so
//! a page costs the same with 10 or 10 million stored jobs. (The common
//! values, SUCCEEDED and NORMAL, walk `jobs_order`, where nearly every row
//! matches.)

use super::{page_query, PageFilter};
use crate::config::Synchronous;
use crate::store::JobStore;
use rusqlite::{params_from_iter, Connection};
use taskyard_protocol::{IdPrefix, JobId, JobState, Priority};

/// SQLite's plan for `filter`'s page, one line per step.
fn plan(conn: &Connection, filter: &PageFilter) -> String {
    let (query, args) = page_query(filter, "id", false);
    let mut stmt = conn
        .prepare(&format!("EXPLAIN QUERY PLAN {query}"))
        .expect("explain");
    let steps = stmt
        .query_map(params_from_iter(args), |r| r.get::<_, String>(3))
        .expect("plan");
    steps
        .collect::<rusqlite::Result<Vec<_>>>()
        .expect("steps")
        .join("\n")
}

fn database() -> (tempfile::TempDir, Connection) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("t.db");
    drop(JobStore::open(&path, Synchronous::Full).expect("create and migrate"));
    let conn = Connection::open(&path).expect("open");
    (dir, conn)
}

fn filters() -> Vec<(&'static str, PageFilter)> {
    let page = PageFilter {
        limit: 50,
        ..PageFilter::default()
    };
    let state = |state| PageFilter {
        state: Some(state),
        ..page.clone()
    };
    let priority = |priority| PageFilter {
        priority: Some(priority),
        ..page.clone()
    };
    vec![
        ("jobs_failed", state(JobState::Failed)),
        ("jobs_cancelled", state(JobState::Cancelled)),
        // Most finished jobs succeed: their pages walk the order itself.
        ("jobs_order", state(JobState::Succeeded)),
        (
            "jobs_type_order",
            PageFilter {
                task_type: Some("echo".into()),
                ..page.clone()
            },
        ),
        ("jobs_low", priority(Priority::Low)),
        ("jobs_high", priority(Priority::High)),
        ("jobs_order", priority(Priority::Normal)),
        ("jobs_order", page),
    ]
}

#[test]
fn each_filter_searches_its_index_in_page_order_without_sorting() {
    let (_dir, conn) = database();
    let cursor = Some((41, 1_700_000_000_000, JobId::mint()));
    for (index, filter) in filters() {
        for oldest_first in [false, true] {
            for before in [None, cursor] {
                let filter = PageFilter {
                    oldest_first,
                    before,
                    ..filter.clone()
                };
                let plan = plan(&conn, &filter);
                assert!(
                    plan.contains(&format!("USING INDEX {index}"))
                        || plan.contains(&format!("USING COVERING INDEX {index}")),
                    "{filter:?}: {plan}"
                );
                // Only rows of one sequence (before version 2 every row
                // had 0) are ever sorted among themselves.
                let sorted = plan.contains("TEMP B-TREE FOR ORDER BY");
                assert!(!sorted, "{filter:?}: {plan}");
            }
        }
    }
}

#[test]
fn an_id_prefix_is_a_range_of_the_primary_key() {
    let (_dir, conn) = database();
    let filter = PageFilter {
        id_prefix: Some(IdPrefix::parse("ffff").expect("prefix")),
        limit: 50,
        ..PageFilter::default()
    };
    let plan = plan(&conn, &filter);
    assert!(
        plan.contains("USING INDEX sqlite_autoindex_jobs_1 (id>? AND id<?)")
            || plan.contains("USING INDEX jobs_order"),
        "{plan}"
    );
}

#[test]
fn a_dense_prefix_walks_the_listing_order() {
    let (_dir, conn) = database();
    let filter = PageFilter {
        id_prefix: Some(IdPrefix::parse("0193").expect("prefix")),
        limit: 50,
        ..PageFilter::default()
    };
    let (query, args) = page_query(&filter, "id", true);
    let mut stmt = conn
        .prepare(&format!("EXPLAIN QUERY PLAN {query}"))
        .expect("explain");
    let plan: Vec<String> = stmt
        .query_map(params_from_iter(args), |r| r.get::<_, String>(3))
        .expect("plan")
        .collect::<rusqlite::Result<_>>()
        .expect("steps");
    let plan = plan.join("\n");
    assert!(
        plan.contains("jobs_order") && !plan.contains("TEMP B-TREE"),
        "{plan}"
    );
}
