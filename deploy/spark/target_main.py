"""spark-submit entry point for the target job: ``spark-submit [spark options] target_main.py ARGS``.

spark-submit runs Python applications from a ``.py`` file, not a console script; this file hands
its arguments to the ``streamer`` command line, so under spark-submit the job takes exactly the
flags (and config file) ``streamer target run`` takes.
"""

from streamer.cli import main

if __name__ == "__main__":
    main()
