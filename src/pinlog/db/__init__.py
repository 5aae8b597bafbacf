"""Database access shared by core and ai: engine, embedded server, named SQL, migrations."""
