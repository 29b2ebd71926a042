import click

from streamer.kafka.naming import DEFAULT_TOPIC_HELP, default_topic, topic_or_default
from tests.unit.cli_options import cli_options


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
    return cli_options(lambda param: param.name == "topic")


def test_every_topic_option_documents_the_one_default() -> None:
    options = _topic_options()
    assert {"source run", "bootstrap", "target run", "status", "verify", "failover"} <= set(options)
    for path, option in options.items():
        assert DEFAULT_TOPIC_HELP in (option.help or ""), path
