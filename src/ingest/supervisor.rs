//! Supervises the team actors: when one stops (idle) or fails (panic), it leaves the registry so
//! the next event starts a fresh one. A failed actor's buffered rows are lost until the
//! write-ahead log lands; its reserved bytes are given back so the team is not wedged.

use ractor::{Actor, ActorProcessingErr, ActorRef, SupervisionEvent};
use std::sync::Arc;
use tracing::{debug, error};

use super::Registry;
use super::admission::Admission;

/// The supervisor takes no messages of its own.
pub enum SupervisorMsg {}

/// The supervisor actor.
pub struct Supervisor;

impl Actor for Supervisor {
    type Msg = SupervisorMsg;
    type State = (Registry, Arc<Admission>);
    type Arguments = (Registry, Arc<Admission>);

    async fn pre_start(
        &self,
        _: ActorRef<SupervisorMsg>,
        args: Self::Arguments,
    ) -> Result<Self::State, ActorProcessingErr> {
        Ok(args)
    }

    async fn handle_supervisor_evt(
        &self,
        _: ActorRef<SupervisorMsg>,
        event: SupervisionEvent,
        (registry, admission): &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        let (cell, failure) = match event {
            SupervisionEvent::ActorTerminated(cell, _, _) => (cell, None),
            SupervisionEvent::ActorFailed(cell, err) => (cell, Some(err)),
            _ => return Ok(()),
        };
        let id = cell.get_id();
        let mut team = None;
        registry.retain(|t, a| {
            let same = a.get_id() == id;
            if same {
                team = Some(t.clone());
            }
            !same
        });
        match (team, failure) {
            (Some(team), Some(err)) => {
                error!(team = %team, error = %err, "team actor failed; its buffered rows are lost");
                let held = admission.team_bytes(&team);
                admission.release(&team, held);
            }
            (Some(team), None) => debug!(team = %team, "team actor stopped"),
            (None, _) => {}
        }
        Ok(())
    }
}
