-- QueueBox V11: the insert order of the outbox. The claim orders the rows of one key by it.
-- Existing rows are numbered in created_at, id order after the largest number already given.
-- Every step is safe to run twice. Stop every worker of an older version first.
-- Batches end at lines that read exactly GO, as sqlcmd splits them. Run with sqlcmd -b -I:
-- the index is filtered and needs QUOTED_IDENTIFIER ON. Each step that names the new column
-- sits in a batch after the ALTER TABLE, because SQL Server compiles a whole batch before it
-- runs it.
SET ANSI_NULLS ON;
SET QUOTED_IDENTIFIER ON;
GO

IF COL_LENGTH(N'outbox', N'sequence') IS NULL
    ALTER TABLE outbox ADD sequence BIGINT NULL;
GO

IF OBJECT_ID(N'outbox_sequence_seq', N'SO') IS NULL
    CREATE SEQUENCE outbox_sequence_seq AS BIGINT START WITH 1 INCREMENT BY 1;
GO

-- Number the rows that have no number yet, after the largest number already given. The table
-- lock keeps inserts out until the transaction ends when a runner applies the file in one.
DECLARE @top BIGINT;
SELECT @top = COALESCE(MAX(sequence), 0) FROM outbox WITH (TABLOCKX, HOLDLOCK);
WITH numbered AS (
    SELECT sequence, ROW_NUMBER() OVER (ORDER BY created_at, id) AS n
    FROM outbox
    WHERE sequence IS NULL
)
UPDATE numbered SET sequence = @top + n;
GO

-- Make the next value of the sequence the largest number plus one. ALTER SEQUENCE takes a
-- constant only, hence the dynamic SQL. A sequence that is already past that point keeps its
-- place, so a second run never hands out a number twice.
DECLARE @next BIGINT;
DECLARE @current BIGINT;
DECLARE @restart NVARCHAR(200);
SELECT @next = COALESCE(MAX(sequence), 0) + 1 FROM outbox;
SELECT @current = CAST(current_value AS BIGINT) FROM sys.sequences WHERE object_id = OBJECT_ID(N'outbox_sequence_seq');
IF @current IS NULL OR @current < @next
BEGIN
    SET @restart = N'ALTER SEQUENCE outbox_sequence_seq RESTART WITH ' + CAST(@next AS NVARCHAR(20));
    EXEC sp_executesql @restart;
END
GO

IF NOT EXISTS (
    SELECT 1
    FROM sys.default_constraints dc
    JOIN sys.columns c ON c.object_id = dc.parent_object_id AND c.column_id = dc.parent_column_id
    WHERE dc.parent_object_id = OBJECT_ID(N'outbox') AND c.name = N'sequence'
)
    ALTER TABLE outbox ADD CONSTRAINT df_outbox_sequence DEFAULT (NEXT VALUE FOR outbox_sequence_seq) FOR sequence;
GO

IF EXISTS (SELECT 1 FROM sys.columns WHERE object_id = OBJECT_ID(N'outbox') AND name = N'sequence' AND is_nullable = 1)
    ALTER TABLE outbox ALTER COLUMN sequence BIGINT NOT NULL;
GO

IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE object_id = OBJECT_ID(N'outbox') AND name = N'idx_outbox_key_sequence')
    CREATE INDEX idx_outbox_key_sequence ON outbox ([key], sequence) WHERE state IN ('pending', 'processing');
GO
