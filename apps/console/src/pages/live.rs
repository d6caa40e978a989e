//! Live updates: Server-Sent Events fed by `WatchConsents` through the person's own session.

use super::*;

/// One `consent` event per change Ward streams (its data is the change number); an `end`
/// event when the stream or the console session ends (the script then reloads the page, which
/// shows why). The console session is checked every second, so sign-out ends the stream too.
pub(super) async fn events(State(app): AppState, headers: HeaderMap) -> Response {
    let Some((handle, session)) = signed(&app, &headers) else {
        return StatusCode::UNAUTHORIZED.into_response();
    };
    let stream = match app.ward.watch(session.token()).await {
        Ok(s) => s,
        Err(r) => {
            if r.ends_session() {
                app.sessions.close(&handle);
            }
            return status_of(&r).into_response();
        }
    };
    drop(session);
    Sse::new(changes(app, handle, stream, "consent", |c| {
        c.change.to_string()
    }))
    .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
    .into_response()
}

/// One `transition` event per phase the Orchestrator records (`WatchTransitions` with the
/// person's own Orchestrator session; its data is the feed sequence), ended like `/events`.
pub(super) async fn transition_events(State(app): AppState, headers: HeaderMap) -> Response {
    let Some((handle, session)) = signed(&app, &headers) else {
        return StatusCode::UNAUTHORIZED.into_response();
    };
    let stream = match app
        .hardware
        .watch_transitions(session.token_for(crate::hardware::ORCHESTRATOR))
        .await
    {
        Ok(s) => s,
        Err(r) => {
            if r.ends_session() {
                app.sessions.close(&handle);
            }
            return status_of(&r).into_response();
        }
    };
    drop(session);
    Sse::new(changes(app, handle, stream, "transition", |e| {
        e.sequence.to_string()
    }))
    .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
    .into_response()
}

/// The events of one office stream: `kind` with `data(message)` per message, then `end`.
fn changes<M: Send + 'static>(
    app: Arc<App>,
    handle: String,
    stream: tonic::Streaming<M>,
    kind: &'static str,
    data: fn(&M) -> String,
) -> impl Stream<Item = Result<Event, Infallible>> {
    let tick = tokio::time::interval(Duration::from_secs(1));
    let closing = app.closing.clone();
    futures::stream::unfold(
        Some((app, handle, stream, tick, closing)),
        move |state| async move {
            enum Next<M> {
                Change(Box<Result<Option<M>, tonic::Status>>),
                Closing,
                Tick,
            }
            let (app, handle, mut stream, mut tick, mut closing) = state?;
            loop {
                let next = tokio::select! {
                    _ = closing.wait_for(|c| *c) => Next::Closing,
                    message = stream.message() => Next::Change(Box::new(message)),
                    _ = tick.tick() => Next::Tick,
                };
                let end = |why: String| Some((Ok(Event::default().event("end").data(why)), None));
                match next {
                    Next::Closing => return end("closing".into()),
                    Next::Tick => {
                        if app.sessions.get(&handle).is_none() {
                            return end("signed out".into());
                        }
                    }
                    Next::Change(change) => match *change {
                        Ok(Some(change)) => {
                            let event = Event::default().event(kind).data(data(&change));
                            return Some((Ok(event), Some((app, handle, stream, tick, closing))));
                        }
                        Ok(None) => return end("ended".into()),
                        Err(status) => {
                            let refusal = Ward::refusal(&status);
                            if refusal.ends_session() {
                                app.sessions.close(&handle);
                            }
                            return end(refusal.reason);
                        }
                    },
                }
            }
        },
    )
}
