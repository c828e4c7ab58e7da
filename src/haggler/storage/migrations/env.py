"""Alembic environment: runs against the connection haggler hands it (see Database.migrate)."""

from alembic import context

from haggler.storage.schema import metadata

connection = context.config.attributes.get("connection")
if connection is None:  # pragma: no cover - haggler always passes a connection
    raise RuntimeError("haggler migrations run through haggler.storage.database.Database.migrate")

context.configure(connection=connection, target_metadata=metadata, render_as_batch=True)
context.run_migrations()
