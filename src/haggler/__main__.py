from haggler.cli import app

app(prog_name="haggler")
