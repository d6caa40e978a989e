//! The operators' console in a real browser (Debian's `chromium`, driven over WebDriver by
//! `chromedriver`) against `lychd dev` (real offices, real processes): sign in with one's own
//! credential; a consent proposed by a test agent appears without reload; approve it and the
//! agent's `ConsumeConsent` succeeds; a consent whose binding is not the one displayed is
//! refused on approve, as is one settled since display; deny; a principal without approve power
//! sees Ward's refusal; a forged form without the CSRF token is refused; sign-out ends access at
//! once, and so does Ward ending the person's sessions; no credential or token appears in any
//! page or URL. A screenshot of each page is written
//! to `target/console-browser/`. A missing chromium fails the test with how to install it.

mod stack;
mod webdriver;

use std::time::{Duration, Instant};

use http::Method;
use lychd_proto::ward::v1::ConsentState;
use stack::{Agent, Stack};
use webdriver::{Browser, ENTER, http};

/// What every page and URL seen is checked for: Ward's credential and session token prefixes.
const SECRET_PREFIXES: [&str; 2] = ["lwc_", "lws_"];

struct Walk {
    browser: Browser,
    stack: Stack,
    agent: Agent,
    shots: std::path::PathBuf,
    /// Every page source and URL seen, checked at the end for secrets.
    seen: Vec<(String, String)>,
    appear_ms: Vec<f64>,
}

impl Walk {
    /// Keep consent `id` as displayed, outside the live list (which may replace its elements at
    /// any moment), change its form with `change` (JavaScript on `form`), and click `button`.
    async fn submit_kept(&self, id: &str, change: &str, button: &str) {
        self.browser
            .run(&format!(
                "const kept = document.getElementById('consent-{id}').cloneNode(true);
                 kept.id = 'kept'; document.querySelector('main').appendChild(kept);
                 const form = kept.querySelector('form'); {change}; return true;"
            ))
            .await;
        self.browser.click(&format!("#kept button.{button}")).await;
    }

    async fn look(&mut self, name: &str) {
        let url = self.browser.url().await;
        let source = self.browser.source().await;
        self.browser
            .screenshot(&self.shots.join(format!("{name}.png")))
            .await;
        self.seen.push((url, source));
    }

    /// The agent proposes a call; the open pending page shows it without a reload. Returns
    /// the consent id and binding digest.
    async fn proposal_appears(&mut self, call: &str) -> (String, String) {
        self.browser
            .run("window.__notReloaded = true; return true;")
            .await;
        let start = Instant::now();
        let consent = self.agent.propose(call).await;
        let selector = format!("#consent-{}", consent.consent_id);
        self.browser
            .wait_until(
                &format!("return document.querySelector('{selector}') !== null;"),
                Duration::from_secs(10),
            )
            .await;
        self.appear_ms.push(start.elapsed().as_secs_f64() * 1000.0);
        assert_eq!(
            self.browser
                .run("return window.__notReloaded === true;")
                .await,
            serde_json::Value::Bool(true),
            "the consent appeared without a reload"
        );
        let shown = self.browser.text(&selector).await;
        assert!(
            shown.contains(&consent.binding_digest),
            "the binding digest is shown: {shown}"
        );
        assert!(
            shown.contains("fs.write") && shown.contains("standard"),
            "{shown}"
        );
        assert!(
            !shown.contains("s3cr3t") && shown.contains("/srv/report.txt"),
            "arguments shown censored: {shown}"
        );
        (consent.consent_id, consent.binding_digest)
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_console_in_a_real_browser() {
    // First, so that a machine without chromium fails at once with how to install it.
    let browser = Browser::start().await;
    let stack = Stack::start().await;
    let agent = stack.agent("agent-e2e").await;
    let shots = lychd_testkit_target().join("console-browser");
    std::fs::create_dir_all(&shots).expect("screenshot dir");
    let mut walk = Walk {
        browser,
        stack,
        agent,
        shots,
        seen: Vec::new(),
        appear_ms: Vec::new(),
    };

    sign_in(&mut walk).await;
    the_hardware_pages_read_with_the_persons_own_sessions(&mut walk).await;
    a_transition_follows_live_and_its_owner_cancels_it(&mut walk).await;
    a_recovery_without_its_proof_is_refused(&mut walk).await;
    the_runs_page_shows_a_run_and_its_transitions(&mut walk).await;
    a_proposal_appears_and_its_approval_is_consumed_by_the_agent(&mut walk).await;
    page_weight(&mut walk).await;
    a_verdict_on_a_binding_other_than_the_displayed_one_is_refused(&mut walk).await;
    a_consent_settled_since_display_is_refused_never_approved(&mut walk).await;
    deny(&mut walk).await;
    a_forged_form_without_the_csrf_token_is_refused(&mut walk).await;
    let handle = sign_out_ends_access_at_once(&mut walk).await;
    a_principal_without_approve_power_sees_the_refusal(&mut walk).await;
    no_token_appears_in_any_page_or_url(&walk, &handle);

    let ms = &walk.appear_ms;
    println!(
        "console: proposal to appearance on an open page (ms, incl. ≤10 ms WebDriver polling): {}",
        ms.iter()
            .map(|m| format!("{m:.0}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    walk.browser.quit().await;
    walk.stack.stop().await;
}

/// `target/` (the test binary is in `target/<profile>/deps`).
fn lychd_testkit_target() -> std::path::PathBuf {
    let exe = std::env::current_exe().expect("own path");
    exe.ancestors()
        .nth(3)
        .expect("invariant: target/<profile>/deps/<test>")
        .to_owned()
}

async fn sign_in(walk: &mut Walk) {
    let b = &walk.browser;
    b.goto(&walk.stack.console_url).await;
    assert!(b.url().await.ends_with("/signin"), "redirected to sign-in");
    walk.look("01-signin").await;
    let b = &walk.browser;
    b.type_into("#credential", &walk.stack.operator_credential)
        .await;
    b.click("#signin").await;
    b.wait_until(
        "return location.pathname === '/consents' && document.getElementById('pending') !== null;",
        Duration::from_secs(10),
    )
    .await;
    assert_eq!(b.text("#principal").await, "operator");
    // The page's live view is open before anything is proposed.
    b.wait_until(
        "return document.getElementById('pending').getAttribute('data-live') === 'open';",
        Duration::from_secs(10),
    )
    .await;
    let cookies = b.cookies().await;
    let session = cookies
        .iter()
        .find(|c| c["name"] == "lychd_console")
        .expect("the session cookie");
    assert_eq!(session["httpOnly"], true, "{session}");
    assert_eq!(session["sameSite"], "Strict", "{session}");
    let handle = session["value"].as_str().expect("value");
    assert_eq!(handle.len(), 64, "an opaque random handle");
    assert!(handle.chars().all(|c| c.is_ascii_hexdigit()));
    walk.look("02-pending-empty").await;
}

/// Transitions, containments and leases: read-only, each with the operator's own session for
/// that office (no refusal: the dev operator may read them); then back to the live list.
async fn the_hardware_pages_read_with_the_persons_own_sessions(walk: &mut Walk) {
    for (n, (link, title)) in [
        ("transitions", "Transitions"),
        ("containments", "Containments"),
        ("leases", "Leases"),
        ("capabilities", "Capabilities"),
    ]
    .into_iter()
    .enumerate()
    {
        walk.browser.click(&format!("nav a[href='/{link}']")).await;
        assert_eq!(walk.browser.text("h1").await, title);
        assert_eq!(
            walk.browser
                .run("return document.getElementById('refusal') === null;")
                .await,
            serde_json::Value::Bool(true),
            "{link}: {}",
            walk.browser.source().await
        );
        walk.look(&format!("02{}-{link}", ["a", "b", "c", "g"][n]))
            .await;
    }
    // The registry as `lychd dev` declares it to the Dispatcher: the resident animator's model.
    let registry = walk.browser.text("#capabilities").await;
    assert!(
        registry.contains("sim0") && registry.contains("qwen3-0.6b"),
        "{registry}"
    );
    walk.browser.click("nav a[href='/consents']").await;
    walk.browser
        .wait_until(
            "return document.getElementById('pending') !== null && document.getElementById('pending').getAttribute('data-live') === 'open';",
            Duration::from_secs(10),
        )
        .await;
}

/// The phase of transition `id` in the open transitions page, once it is listed.
fn phase_is(id: &str, phase: &str) -> String {
    format!(
        "const c = document.querySelector('#t-{id} .phase'); return c !== null && c.textContent === '{phase}';"
    )
}

/// The transitions page follows phases live (`WatchTransitions`): the operator's own
/// transition — its evictee's lease holding it in `draining` — appears and reaches `draining`
/// without a reload; its owner cancels it from the page, and the page, open again, follows it
/// to `cancelled restored`.
async fn a_transition_follows_live_and_its_owner_cancels_it(walk: &mut Walk) {
    let live = "const l = document.getElementById('transition-list'); return l !== null && l.getAttribute('data-live') === 'open';";
    walk.browser.click("nav a[href='/transitions']").await;
    walk.browser.wait_until(live, Duration::from_secs(10)).await;
    walk.browser
        .run("window.__notReloaded = true; return true;")
        .await;
    let lease = walk.stack.lease("llama-3.1-8b-q4").await;
    let id = walk
        .stack
        .request_transition("gpu-b:chat:qwen3-8b-q4", "console-e2e-swap")
        .await;
    walk.browser
        .wait_until(&phase_is(&id, "draining"), Duration::from_secs(15))
        .await;
    assert_eq!(
        walk.browser
            .run("return window.__notReloaded === true;")
            .await,
        serde_json::Value::Bool(true),
        "the transition's phases appeared without a reload"
    );
    walk.look("02d-transitions-live").await;
    walk.browser.click(&format!("#t-{id} button.cancel")).await;
    assert_eq!(
        walk.browser.text("#outcome").await,
        "Cancellation recorded",
        "{}",
        walk.browser.source().await
    );
    walk.look("02e-transition-cancel").await;
    walk.browser.click("#back").await;
    walk.browser
        .wait_until(
            &phase_is(&id, "cancelled restored"),
            Duration::from_secs(30),
        )
        .await;
    assert!(
        walk.browser
            .run(&format!(
                "return document.querySelector('#t-{id} button.cancel') === null;"
            ))
            .await
            == serde_json::Value::Bool(true),
        "a settled transition offers no cancel"
    );
    walk.look("02f-transition-cancelled").await;
    walk.stack.release(&lease).await;
    walk.browser.click("nav a[href='/consents']").await;
    walk.browser
        .wait_until(
            "return document.getElementById('pending') !== null && document.getElementById('pending').getAttribute('data-live') === 'open';",
            Duration::from_secs(10),
        )
        .await;
}

/// The recover form is the person's own `RecoverContainment`: the dev stack has no containment,
/// so a recovery of one (a form like the page's, carrying the session's CSRF token) finds no
/// record to prove and is refused in plain words with the Orchestrator's reason; nothing changes.
async fn a_recovery_without_its_proof_is_refused(walk: &mut Walk) {
    walk.browser.click("nav a[href='/containments']").await;
    assert_eq!(walk.browser.text("h1").await, "Containments");
    walk.browser
        .run(
            "const f = document.createElement('form'); f.method = 'post';
             f.action = '/containments/424242/recover';
             const c = document.querySelector('form.signout input[name=csrf]').cloneNode();
             f.appendChild(c); const b = document.createElement('button'); b.type = 'submit';
             b.id = 'recover-unknown'; b.textContent = 'Recover'; f.appendChild(b);
             document.querySelector('main').appendChild(f); return true;",
        )
        .await;
    walk.browser.click("#recover-unknown").await;
    assert_eq!(walk.browser.text("#outcome").await, "Not recovered");
    assert_eq!(walk.browser.text("#reason").await, "CONTAINMENT_NOT_FOUND");
    let words = walk.browser.text("#refusal").await;
    assert!(
        words.contains("no containment with this id") && words.contains("What to do next"),
        "{words}"
    );
    walk.look("02h-recover-refused").await;
    walk.browser.click("#back").await;
    assert_eq!(
        walk.browser.text("#none").await,
        "No containment has been recorded."
    );
    walk.browser.click("nav a[href='/consents']").await;
    walk.browser
        .wait_until(
            "return document.getElementById('pending') !== null && document.getElementById('pending').getAttribute('data-live') === 'open';",
            Duration::from_secs(10),
        )
        .await;
}

/// A run the operator started over gRPC is on the runs page (the operator's own Runner
/// session, taken at sign-in); its page shows its state, what it consumed, its transitions from
/// creation on and its latest checkpoint, which verifies.
async fn the_runs_page_shows_a_run_and_its_transitions(walk: &mut Walk) {
    let id = walk.stack.start_run("console-e2e-run-1").await;
    // The page is read once the run has ended (its single model step takes a moment).
    walk.stack.wait_run_ended(&id).await;
    walk.browser.click("nav a[href='/runs']").await;
    assert_eq!(walk.browser.text("h1").await, "Runs");
    let row = walk.browser.text(&format!("#run-{id}")).await;
    assert!(row.contains("summarize 0.1.0"), "{row}");
    walk.look("02i-runs").await;
    walk.browser
        .click(&format!("#run-{id} a[href='/runs/{id}']"))
        .await;
    assert_eq!(walk.browser.text("#run-id").await, id);
    let transitions = walk.browser.text("#run-transitions").await;
    assert!(transitions.contains("CREATED"), "{transitions}");
    assert!(
        walk.browser.text("#verified").await == "verifies",
        "{}",
        walk.browser.source().await
    );
    walk.look("02j-run").await;
    // The run has ended, so the page offers no Cancel; the same form sent anyway is the
    // operator's own CancelRun, refused by the Runner in plain words.
    assert_eq!(
        walk.browser
            .run("return document.querySelector('button.cancel') === null;")
            .await,
        serde_json::Value::Bool(true),
        "an ended run offers no cancel"
    );
    walk.browser
        .run(&format!(
            "const f = document.createElement('form'); f.method = 'post';
             f.action = '/runs/{id}/cancel';
             f.appendChild(document.querySelector('form.signout input[name=csrf]').cloneNode());
             const b = document.createElement('button'); b.type = 'submit'; b.id = 'cancel-ended';
             b.textContent = 'Cancel'; f.appendChild(b);
             document.querySelector('main').appendChild(f); return true;"
        ))
        .await;
    walk.browser.click_and_load("#cancel-ended").await;
    assert_eq!(walk.browser.text("#outcome").await, "Not cancelled");
    assert_eq!(walk.browser.text("#reason").await, "RUN_FINISHED");
    walk.look("02k-run-cancel-refused").await;
    walk.browser.click("nav a[href='/consents']").await;
    walk.browser
        .wait_until(
            "return document.getElementById('pending') !== null && document.getElementById('pending').getAttribute('data-live') === 'open';",
            Duration::from_secs(10),
        )
        .await;
}

async fn a_proposal_appears_and_its_approval_is_consumed_by_the_agent(walk: &mut Walk) {
    let (id, digest) = walk.proposal_appears("call-approve").await;
    walk.look("03-pending-live").await;
    walk.browser
        .click(&format!("#consent-{id} button.approve"))
        .await;
    assert_eq!(walk.browser.text("#outcome").await, "Approved");
    assert_eq!(walk.browser.text("#state").await, "granted");
    walk.look("04-approved").await;
    let consumed = walk
        .agent
        .consume(&id, &digest)
        .await
        .expect("the agent consumes the approval the console gave");
    assert_eq!(consumed.consumed_by, walk.agent.principal_id);
    walk.browser.click("#back").await;
}

/// The pending page with one consent: its HTML, stylesheet and script, as the browser fetched
/// them (`performance` entries; sizes before compression, which the console does not use).
async fn page_weight(walk: &mut Walk) {
    walk.proposal_appears("call-weight").await;
    walk.browser
        .goto(&format!("{}consents", walk.stack.console_url))
        .await;
    let weight = walk
        .browser
        .run(
            "const n = performance.getEntriesByType('navigation')[0];
             const r = performance.getEntriesByType('resource').filter(e => !e.name.endsWith('/events'));
             return [n.decodedBodySize, r.reduce((s, e) => s + e.decodedBodySize, 0), r.length];",
        )
        .await;
    println!(
        "console: page weight of /consents with one pending consent: {} bytes HTML + {} bytes in {} \
         sub-resources (stylesheet and script), no images or fonts",
        weight[0], weight[1], weight[2]
    );
    assert!(weight[2].as_u64().expect("count") == 2, "{weight}");
}

async fn a_verdict_on_a_binding_other_than_the_displayed_one_is_refused(walk: &mut Walk) {
    // Ward never lets a consent's binding change; what can differ is the binding the page
    // displayed and the consent's: here the displayed call (the form's review digest) is
    // another call's, as a page showing a since-replaced call would carry.
    let (other, other_digest) = walk.proposal_appears("call-other").await;
    let (id, digest) = walk.proposal_appears("call-changed").await;
    assert_ne!(digest, other_digest);
    walk.submit_kept(
        &id,
        &format!("form.querySelector('input[name=review_digest]').value = '{other_digest}'"),
        "approve",
    )
    .await;
    assert_eq!(walk.browser.text("#outcome").await, "Refused");
    assert_eq!(walk.browser.text("#reason").await, "REVIEW_DIGEST_MISMATCH");
    let words = walk.browser.text("#refusal").await;
    assert!(
        words.contains("no longer the call you reviewed") && words.contains("What to do next"),
        "{words}"
    );
    walk.look("05-refused-binding").await;
    assert_eq!(walk.stack.state_of(&id).await, ConsentState::Pending);
    assert_eq!(walk.stack.state_of(&other).await, ConsentState::Pending);
    walk.browser.click("#back").await;
}

async fn a_consent_settled_since_display_is_refused_never_approved(walk: &mut Walk) {
    let (id, _) = walk.proposal_appears("call-withdrawn").await;
    // The consent as displayed, kept where the live list does not replace it (as if the click
    // came just before the update): the run is then withdrawn behind it (its consents
    // cancelled), and the live list drops it.
    walk.browser
        .run(&format!(
            "const kept = document.getElementById('consent-{id}').cloneNode(true);
             kept.id = 'kept'; document.querySelector('main').appendChild(kept); return true;"
        ))
        .await;
    walk.agent.cancel_run().await;
    walk.browser
        .wait_until(
            &format!("return document.getElementById('consent-{id}') === null;"),
            Duration::from_secs(10),
        )
        .await;
    walk.browser.click("#kept button.approve").await;
    assert_eq!(walk.browser.text("#outcome").await, "Nothing was changed");
    assert_eq!(walk.browser.text("#state").await, "cancelled");
    walk.look("06-settled-since-display").await;
    assert_eq!(walk.stack.state_of(&id).await, ConsentState::Cancelled);
    walk.browser.click("#back").await;
}

async fn deny(walk: &mut Walk) {
    let (id, digest) = walk.proposal_appears("call-deny").await;
    // By keyboard alone: Tab to the consent's Deny button, Enter; another proposal arriving
    // meanwhile refreshes the list, and the focus stays on that button.
    walk.browser
        .tab_to(&format!("#consent-{id} button.deny"))
        .await;
    let (other, _) = walk.proposal_appears("call-while-focused").await;
    assert_eq!(
        walk.browser
            .run(&format!(
                "return document.activeElement === document.querySelector('#consent-{id} button.deny');"
            ))
            .await,
        serde_json::Value::Bool(true),
        "the focus survives a live refresh"
    );
    walk.browser.keys(ENTER).await;
    assert_eq!(walk.browser.text("#outcome").await, "Denied");
    assert_eq!(walk.browser.text("#state").await, "denied");
    walk.look("07-denied").await;
    assert_eq!(walk.stack.state_of(&other).await, ConsentState::Pending);
    let refused = walk.agent.consume(&id, &digest).await.expect_err("denied");
    assert_eq!(refused, "CONSENT_NOT_GRANTED");
    walk.browser
        .goto(&format!("{}consents/history", walk.stack.console_url))
        .await;
    assert_eq!(
        walk.browser.text(&format!("#history-{id} .state")).await,
        "denied"
    );
    walk.look("08-history").await;
    walk.browser.click("nav a[href='/consents']").await;
}

async fn a_forged_form_without_the_csrf_token_is_refused(walk: &mut Walk) {
    let (id, _) = walk.proposal_appears("call-forged").await;
    walk.submit_kept(
        &id,
        "form.querySelector('input[name=csrf]').remove()",
        "approve",
    )
    .await;
    assert_eq!(
        walk.browser.text("#outcome").await,
        "Refused: the form is not this page's"
    );
    walk.look("09-forged").await;
    assert_eq!(walk.stack.state_of(&id).await, ConsentState::Pending);
    // A form with another value is refused alike.
    walk.browser.click("#back").await;
    walk.browser
        .wait_until(
            &format!("return document.getElementById('consent-{id}') !== null;"),
            Duration::from_secs(10),
        )
        .await;
    walk.submit_kept(
        &id,
        &format!(
            "form.querySelector('input[name=csrf]').value = '{}'",
            "0".repeat(64)
        ),
        "approve",
    )
    .await;
    assert_eq!(
        walk.browser.text("#outcome").await,
        "Refused: the form is not this page's"
    );
    assert_eq!(walk.stack.state_of(&id).await, ConsentState::Pending);
    walk.browser.click("#back").await;
}

/// Returns the handle the browser held before signing out.
async fn sign_out_ends_access_at_once(walk: &mut Walk) -> String {
    let handle = walk
        .browser
        .cookies()
        .await
        .iter()
        .find(|c| c["name"] == "lychd_console")
        .and_then(|c| c["value"].as_str().map(str::to_owned))
        .expect("signed in");
    walk.browser.click("#signout").await;
    assert_eq!(walk.browser.text("#notice").await, "You are signed out.");
    walk.look("10-signed-out").await;
    walk.browser
        .goto(&format!("{}consents", walk.stack.console_url))
        .await;
    assert!(walk.browser.url().await.ends_with("/signin"));
    // The handle itself opens nothing any more: the session is gone server-side.
    let cookie = format!("lychd_console={handle}");
    for path in ["/consents/pending", "/events"] {
        let (status, _, _) = http(
            walk.stack.console_addr,
            Method::GET,
            path,
            &[("cookie", &cookie)],
            Vec::new(),
        )
        .await;
        assert_eq!(status, http::StatusCode::UNAUTHORIZED, "{path}");
    }
    handle
}

async fn a_principal_without_approve_power_sees_the_refusal(walk: &mut Walk) {
    let (reviewer_id, reviewer) = walk.stack.reviewer("reviewer-e2e").await;
    // By keyboard alone: Tab to the credential field, type it, Enter.
    let b = &walk.browser;
    b.tab_to("#credential").await;
    b.keys(&reviewer).await;
    b.keys(ENTER).await;
    b.wait_until(
        "return location.pathname === '/consents';",
        Duration::from_secs(10),
    )
    .await;
    assert_eq!(b.text("#principal").await, "reviewer-e2e");
    b.wait_until(
        "return document.getElementById('pending').getAttribute('data-live') === 'open';",
        Duration::from_secs(10),
    )
    .await;
    let (id, _) = walk.proposal_appears("call-no-power").await;
    walk.browser
        .click(&format!("#consent-{id} button.approve"))
        .await;
    assert_eq!(walk.browser.text("#outcome").await, "Refused");
    assert_eq!(walk.browser.text("#reason").await, "NO_ASSIGNMENT");
    let words = walk.browser.text("#refusal").await;
    assert!(
        words.contains("ward:approve"),
        "says what power is missing: {words}"
    );
    walk.look("11-no-approve-power").await;
    assert_eq!(walk.stack.state_of(&id).await, ConsentState::Pending);
    // Nor may it read the Dispatcher's leases: Ward's refusal, in plain words.
    walk.browser.click("nav a[href='/leases']").await;
    assert_eq!(walk.browser.text("#reason").await, "NO_ASSIGNMENT");
    walk.look("12-leases-refused").await;
    // Ward ends the person's sessions (the principal is revoked): the console's ends with them
    // on the next request, and the page goes back to sign-in.
    walk.stack.revoke(&reviewer_id).await;
    walk.browser.click("nav a[href='/consents']").await;
    walk.browser
        .wait_until(
            "return location.pathname === '/signin';",
            Duration::from_secs(10),
        )
        .await;
    walk.browser
        .goto(&format!("{}consents/history", walk.stack.console_url))
        .await;
    assert!(
        walk.browser.url().await.ends_with("/signin"),
        "the console session is gone"
    );
    walk.look("13-revoked").await;
}

fn no_token_appears_in_any_page_or_url(walk: &Walk, handle: &str) {
    assert!(walk.seen.len() >= 15);
    for (url, source) in &walk.seen {
        for secret in SECRET_PREFIXES
            .iter()
            .copied()
            .chain([handle, walk.stack.operator_credential.as_str()])
        {
            assert!(!url.contains(secret), "{secret} in the URL {url}");
            assert!(
                !source.contains(secret),
                "{secret:.8}… in the page at {url}"
            );
        }
        assert!(
            !url.contains('?'),
            "no query string carries anything: {url}"
        );
    }
}
