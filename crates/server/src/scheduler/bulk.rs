//! Answers to what operators ask of many jobs at once: which jobs an id
//! prefix names, and why a named job was not retried.

use crate::scheduler::deletion::refusal;
use crate::scheduler::RequeueRefused;
use taskyard_protocol::id_prefix::MAX_CANDIDATES;
use taskyard_protocol::{ClientResponse, IdPrefix, JobId, Refusal};

/// The answer to a `Resolve` of `prefix` that found `ids` (newest first).
pub fn resolved(prefix: IdPrefix, mut ids: Vec<JobId>) -> ClientResponse {
    ids.sort_unstable_by(|a, b| b.cmp(a));
    ids.dedup();
    match ids.len() {
        0 => ClientResponse::NoMatch { prefix },
        1 => ClientResponse::Resolved { job_id: ids[0] },
        _ => {
            ids.truncate(MAX_CANDIDATES);
            ClientResponse::Ambiguous {
                prefix,
                candidates: ids,
            }
        }
    }
}

/// Why a requeue of one named job did nothing, as a bulk answer says it.
pub fn requeue_refusal(job_id: JobId, refused: RequeueRefused) -> Refusal {
    let reason = match refused {
        RequeueRefused::NotFound => "not found (expired or never existed)".to_string(),
        RequeueRefused::NotFailed(state) => {
            format!("job is {state}; only FAILED or CANCELLED jobs can be retried")
        }
        RequeueRefused::Admission(reason) => reason,
        RequeueRefused::BeingDeleted => "the job is being deleted".to_string(),
    };
    refusal(job_id, reason)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prefix_resolves_to_one_job_or_lists_candidates_newest_first() {
        let prefix = IdPrefix::parse("0193").expect("prefix");
        assert_eq!(
            resolved(prefix.clone(), vec![]),
            ClientResponse::NoMatch {
                prefix: prefix.clone()
            }
        );
        let (a, b) = (JobId::mint(), JobId::mint());
        assert_eq!(
            resolved(prefix.clone(), vec![a, a]),
            ClientResponse::Resolved { job_id: a }
        );
        let many: Vec<JobId> = (0..12).map(|_| JobId::mint()).collect();
        match resolved(prefix, [vec![a, b], many].concat()) {
            ClientResponse::Ambiguous { candidates, .. } => {
                assert_eq!(candidates.len(), MAX_CANDIDATES);
                assert!(candidates.windows(2).all(|w| w[0] > w[1]), "newest first");
            }
            other => panic!("not ambiguous: {other:?}"),
        }
    }
}
