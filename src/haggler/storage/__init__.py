"""Durable state: SQLAlchemy 2 Core tables, Alembic migrations, and repositories.

SQLite (WAL) is the embedded default; PostgreSQL runs the very same code.
"""
