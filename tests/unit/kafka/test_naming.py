import click

from streamer.cli import cli
from streamer.kafka.naming import DEFAULT_TOPIC_HELP, default_topic, topic_or_default


def test_default_topic_names_the_source() -> None:
    assert default_topic("src1") == "streamer.src1.events"
    assert DEFAULT_TOPIC_HELP == "streamer.<source-id>.events"


def test_an_explicit_topic_wins() -> None:
    assert topic_or_default("mine", "src1") == "mine"
    assert topic_or_default(None, "src1") == default_topic("src1")
    assert topic_or_default("", "src1") == default_topic("src1")


def test_the_agent_publishes_where_targets_read() -> None:
    from streamer.source.agent import AgentConfig

    assert AgentConfig(source_id="src1", kafka={}).topic_name == default_topic("src1")
    assert AgentConfig(source_id="src1", kafka={}, topic="t").topic_name == "t"


def _topic_options() -> dict[str, click.Option]:
    found: dict[str, click.Option] = {}
    ctx = click.Context(cli)
    todo: list[tuple[str, click.Command]] = []
    for name in cli.list_commands(ctx):
        command = cli.get_command(ctx, name)
        assert command is not None
        todo.append((name, command))
    while todo:
        path, command = todo.pop()
        if isinstance(command, click.Group):
            todo.extend((f"{path} {n}", c) for n, c in command.commands.items())
        for param in command.params:
            if isinstance(param, click.Option) and param.name == "topic":
                found[path] = param
    return found


def test_every_topic_option_documents_the_one_default() -> None:
    options = _topic_options()
    assert {"source run", "bootstrap", "target run", "status", "verify", "failover"} <= set(options)
    for path, option in options.items():
        assert DEFAULT_TOPIC_HELP in (option.help or ""), path
