"""Chat model doubles for the LangChain and LangGraph tests: models that decide from their messages.

None of LangChain's fake chat models binds tools or looks at what it is
asked. ``DecidingChatModel`` answers with whatever its ``decide`` function
makes of the messages (and the bound tools), so a model asked again after a
crash, in a new process, answers the same: the tests count what really ran,
not a script's position. It streams its answer word by word, tool calls in
the last chunk, with usage on every answer. ``tool_loop`` builds the usual
graph around it: a model node and a tool node.
"""

from __future__ import annotations

import json
import operator
from collections.abc import Callable, Iterator
from typing import Annotated, Any, TypedDict

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.graph import END, START, StateGraph
from langgraph.prebuilt import ToolNode

Decide = Callable[[list[BaseMessage], dict[str, Any]], AIMessage | str]


def turn(messages: list[BaseMessage]) -> int:
    """How many tool results the conversation holds: the agent's turn, counted from 0."""
    return sum(isinstance(m, ToolMessage) for m in messages)


def usage(messages: list[BaseMessage], reply: AIMessage) -> dict[str, int]:
    """Made-up token counts that depend only on the request and the reply."""
    i = 10 * len(messages)
    o = 1 + len(str(reply.content)) + 5 * len(reply.tool_calls)
    return {"input_tokens": i, "output_tokens": o, "total_tokens": i + o}


def tool_call(name: str, args: dict[str, Any], call_id: str) -> dict[str, Any]:
    """A tool call as a model's reply holds it."""
    return {"name": name, "args": args, "id": call_id, "type": "tool_call"}


class DecidingChatModel(BaseChatModel):
    """A chat model whose answer is ``decide(messages, call_kwargs)``; it binds tools.

    ``call_kwargs`` holds what the call was given: the bound ``tools`` (as
    OpenAI tool dicts) and ``tool_choice``, and ``stop``.
    """

    decide: Decide
    model_name: str = "deciding-1"

    @property
    def _llm_type(self) -> str:
        return "deciding"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"model_name": self.model_name}

    def _reply(self, messages: list[BaseMessage], stop: Any, kwargs: dict[str, Any]) -> AIMessage:
        got = self.decide(messages, {**kwargs, "stop": stop})
        reply = AIMessage(content=got) if isinstance(got, str) else got
        if reply.usage_metadata is None:
            reply.usage_metadata = usage(messages, reply)  # type: ignore[assignment]
        reply.response_metadata = {"model_name": self.model_name, **reply.response_metadata}
        return reply

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self._reply(messages, stop, kwargs))])

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        reply = self._reply(messages, stop, kwargs)
        words = str(reply.content).split(" ") if reply.content else []
        for i, word in enumerate(words):
            text = word if i == 0 else " " + word
            chunk = ChatGenerationChunk(message=AIMessageChunk(content=text))
            if run_manager is not None:
                run_manager.on_llm_new_token(text, chunk=chunk)
            yield chunk
        last = AIMessageChunk(
            content="",
            tool_call_chunks=[
                {"name": c["name"], "args": json.dumps(c["args"]), "id": c["id"], "index": i}
                for i, c in enumerate(reply.tool_calls)
            ],
            usage_metadata=reply.usage_metadata,
            response_metadata={"model_name": self.model_name},
            chunk_position="last",
        )
        yield ChatGenerationChunk(message=last)

    def bind_tools(self, tools: Any, *, tool_choice: Any = None, **kwargs: Any) -> Any:
        """Bind tools as OpenAI tool dicts (what ``decide`` sees under ``tools``)."""
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], tool_choice=tool_choice, **kwargs)


class Chat(TypedDict):
    """A conversation: the state of a tool loop."""

    messages: Annotated[list[BaseMessage], operator.add]


def tool_loop(
    decide: Decide, tools: list[Any], *, handle_tool_errors: Any = True, checkpointer: Any = None
) -> Any:
    """A graph of a model node and a tool node that loops until the model answers in words.

    The model is a ``DecidingChatModel`` made durable with ``wrap`` and bound to
    ``tools``; the tools are given to LangGraph's ``ToolNode`` as they are.
    """
    from durable.integrations.langchain import wrap

    model = wrap(DecidingChatModel(decide=decide)).bind_tools(tools)

    async def ask(state: Chat) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    def route(state: Chat) -> str:
        last = state["messages"][-1]
        return "tools" if isinstance(last, AIMessage) and last.tool_calls else END

    g = StateGraph(Chat)
    g.add_node("ask", ask)
    g.add_node("tools", ToolNode(tools, handle_tool_errors=handle_tool_errors))
    g.add_edge(START, "ask")
    g.add_conditional_edges("ask", route, ["tools", END])
    g.add_edge("tools", "ask")
    return g.compile(checkpointer=checkpointer)
