//! Supervises the team actors: every stop or failure is reported to the dispatcher, which owns
//! the actors and restarts a failed one with its buffer rebuilt from the WAL.

use ractor::{Actor, ActorProcessingErr, ActorRef, SupervisionEvent};
use tokio::sync::mpsc;

use super::control::Control;

/// The supervisor takes no messages of its own.
pub enum SupervisorMsg {}

/// The supervisor actor.
pub struct Supervisor;

impl Actor for Supervisor {
    type Msg = SupervisorMsg;
    type State = mpsc::UnboundedSender<Control>;
    type Arguments = mpsc::UnboundedSender<Control>;

    async fn pre_start(
        &self,
        _: ActorRef<SupervisorMsg>,
        control: Self::Arguments,
    ) -> Result<Self::State, ActorProcessingErr> {
        Ok(control)
    }

    async fn handle_supervisor_evt(
        &self,
        _: ActorRef<SupervisorMsg>,
        event: SupervisionEvent,
        control: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        let down = match event {
            SupervisionEvent::ActorTerminated(cell, _, _) => Control::ActorDown {
                actor: cell.get_id(),
                failed: false,
            },
            SupervisionEvent::ActorFailed(cell, err) => {
                tracing::error!(error = %err, "team actor failed");
                Control::ActorDown {
                    actor: cell.get_id(),
                    failed: true,
                }
            }
            _ => return Ok(()),
        };
        let _ = control.send(down);
        Ok(())
    }
}
