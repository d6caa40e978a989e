//! `WatchRun`: a run's transitions as they commit, from a cursor, in one stream place of the
//! caller's share; Ward is asked again while the stream is open (a revoked reader's stream
//! ends with the refusal). The stream ends after the transition into a terminal state.

use std::pin::Pin;
use std::time::Duration;

use futures::Stream;
use lychd_proto::runner::v1 as pb;
use lychd_runtime::feed::Cursor;
use tonic::{Request, Response, Status};

use super::{RunnerService, convert, err, reader};
use crate::actions;
use crate::error::RunnerError;
use crate::error::reasons::SEQUENCE_OUT_OF_RANGE;

pub(super) type TransitionStream =
    Pin<Box<dyn Stream<Item = Result<pb::RunTransition, Status>> + Send + 'static>>;

/// How often an idle stream reads the feed again.
const FOLLOW_POLL: Duration = Duration::from_millis(250);
/// How often an open stream asks Ward again.
const RECHECK: Duration = Duration::from_secs(30);

fn decode(body: &pb::WatchRunRequest) -> Result<(uuid::Uuid, i64), RunnerError> {
    let id = convert::run_id("run_id", &body.run_id);
    let after = i64::try_from(body.after_sequence).map_err(|_| {
        RunnerError::invalid(
            "after_sequence",
            SEQUENCE_OUT_OF_RANGE,
            "must be at most 2^63 - 1",
        )
    });
    match (id, after) {
        (Ok(id), Ok(after)) => Ok((id, after)),
        (Err(RunnerError::InvalidArgument(mut v)), Err(RunnerError::InvalidArgument(w))) => {
            v.extend(w);
            Err(v.into())
        }
        (Err(e), _) | (_, Err(e)) => Err(e),
    }
}

impl RunnerService {
    pub(super) async fn watch(
        &self,
        request: Request<pb::WatchRunRequest>,
    ) -> Result<Response<TransitionStream>, Status> {
        let (id, after) = self
            .ctx
            .authorizer
            .decoded(&request, decode(request.get_ref()).map_err(err))
            .await?;
        let object = format!("run:{id}");
        let (principal, all) = self.reader(&request, &object).await?;
        let run = self
            .service
            .get(id, reader(&principal, all))
            .await
            .map_err(err)?;
        // Another's run is read by reading all: that is asked again too.
        let others = run.owner != principal.id;
        let place = self
            .streams
            .open(&principal.id)
            .map_err(|refused| err(RunnerError::from(refused)))?;
        let authorizer = self.ctx.authorizer.clone();
        let metadata = request.metadata().clone();
        let service = self.service.clone();
        let (tx, rx) = tokio::sync::mpsc::channel::<Result<pb::RunTransition, Status>>(64);
        tokio::spawn(async move {
            let _place = place;
            let asking = Request::from_parts(metadata, tonic::Extensions::default(), ());
            let recheck = || async {
                authorizer
                    .authorize(&asking, actions::READ, &object)
                    .await?;
                if others {
                    authorizer
                        .authorize(&asking, actions::READ_ALL, "run:*")
                        .await?;
                }
                Ok::<(), Status>(())
            };
            let mut cursor = Cursor::after(after);
            let mut tick = tokio::time::interval(RECHECK);
            tick.tick().await;
            loop {
                let (rows, full) = match service.follow(id, &mut cursor).await {
                    Ok(r) => r,
                    Err(e) => {
                        let _ = tx.send(Err(err(e))).await;
                        return;
                    }
                };
                for t in &rows {
                    if tx.send(Ok(convert::transition(t))).await.is_err() {
                        return;
                    }
                    if service.is_terminal(&t.target_state) {
                        return;
                    }
                }
                if full {
                    continue;
                }
                tokio::select! {
                    () = tx.closed() => return,
                    _ = tick.tick() => {
                        if let Err(refused) = recheck().await {
                            let _ = tx.send(Err(refused)).await;
                            return;
                        }
                    }
                    () = tokio::time::sleep(FOLLOW_POLL) => {}
                }
            }
        });
        Ok(Response::new(Box::pin(
            tokio_stream::wrappers::ReceiverStream::new(rx),
        )))
    }
}
