-- Issue 30 item 3: retention. The Archive's retention job (`store/retention.rs`) deletes, in
-- bounded batches, recall receipts issued long ago (a receipt is text-free; its notes stay).
-- This index lets each batch find the oldest without scanning the table.
CREATE INDEX recall_receipts_by_time ON archive.recall_receipts (created_at);
