"""What the views share, set by serve.py before it serves: the connection
pool (autocommit, libpq's PG* variables) and the answer to a database error,
read at start-up (when the database fails, it cannot be asked)."""

pool = None
error_answer = None
