-- Issue 30 item 3: retention. The Dispatcher's retention job (`store/retention.rs`) deletes, in
-- bounded batches, leases that ended (released, or expired unreleased) long ago with their
-- dispatch event and granting request, old dispatch events, old unanswered-by-grant lease
-- requests and closures reopened long ago. These indexes let each batch find its oldest rows
-- without scanning the table.
CREATE INDEX leases_by_end ON leases ((coalesce(released_at, expires_at)));
CREATE INDEX dispatch_events_by_admission ON dispatch_events (admitted_at);
CREATE INDEX lease_requests_ungranted_by_answer ON lease_requests (answered_at)
    WHERE lease_id IS NULL;
CREATE INDEX closures_reopened ON closures (reopened_at) WHERE reopened_at IS NOT NULL;
