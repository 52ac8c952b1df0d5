"""The ``streamapp`` subcommands beyond the core ones, one module each, registered on ``streamapp.cli.main``.

``topologies`` is what every command shares: reading ``--topology FILE|module:function`` and the working folder on
``sys.path``. Errors in user input are ``click.ClickException`` (one ``Error: ...`` message, exit code 1).
"""
