//! Every filter a history page offers is served by an index in the
//! page's order, in either order and after a cursor: SQLite's own query
//! plan says so (a search of the index, no sort of the matching rows), so
//! a page costs the same with 10 or 10 million stored jobs.

use super::{page_query, PageFilter};
use crate::config::Synchronous;
use crate::protocol::{IdPrefix, JobId, JobState, Priority};
use crate::store::JobStore;
use rusqlite::{params_from_iter, Connection};

/// SQLite's plan for `filter`'s page, one line per step.
fn plan(conn: &Connection, filter: &PageFilter) -> String {
    let (query, args) = page_query(filter, "id");
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
    vec![
        (
            "jobs_finished_state",
            PageFilter {
                state: Some(JobState::Failed),
                ..page.clone()
            },
        ),
        (
            "jobs_type_order",
            PageFilter {
                task_type: Some("echo".into()),
                ..page.clone()
            },
        ),
        (
            "jobs_priority_order",
            PageFilter {
                priority: Some(Priority::Low),
                ..page.clone()
            },
        ),
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
                assert!(!plan.contains("TEMP B-TREE"), "{filter:?}: {plan}");
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
