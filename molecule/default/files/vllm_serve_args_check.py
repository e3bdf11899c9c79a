"""Parses rendered `vllm serve` command lines with the installed vLLM's own CLI, as `vllm serve` would.

Run with the vLLM venv's python on the node. stdin: a JSON object {case: argv}, each argv as systemd
loaded it (executable first). For each case it builds vLLM's `serve` parser (vllm.entrypoints.cli.serve),
parses the arguments (argparse refuses unknown flags and bad choices), runs the serve command's own
validation, builds the engine arguments (AsyncEngineArgs.from_cli_args), checks the KV-cache dtype with
vLLM's CacheConfig and looks up the tool-call and
reasoning parsers in vLLM's registries. It loads no model and needs no GPU (see use_cpu_platform). stdout: a JSON object
{case: {ok, error, and what vLLM understood}}; exit status 1 when a case fails.
"""
import json
import sys
import traceback


def check(argv):
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.entrypoints.cli.serve import ServeSubcommand
    from vllm.reasoning import ReasoningParserManager
    from vllm.tool_parsers import ToolParserManager
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = FlexibleArgumentParser(prog="vllm")
    subparsers = parser.add_subparsers(dest="subparser")
    serve = ServeSubcommand()
    serve.subparser_init(subparsers)
    args = parser.parse_args(argv[1:])
    serve.validate(args)
    engine = AsyncEngineArgs.from_cli_args(args)
    # The KV-cache dtype is checked when the engine config is built, which needs the model's config.json:
    # run CacheConfig's own check here.
    from vllm.config.cache import CacheConfig
    CacheConfig(cache_dtype=engine.kv_cache_dtype)
    return {
        "model": args.model_tag,
        "served_model_name": engine.served_model_name,
        "tensor_parallel_size": engine.tensor_parallel_size,
        "enable_expert_parallel": engine.enable_expert_parallel,
        "numa_bind": engine.numa_bind,
        "max_model_len": engine.max_model_len,
        "gpu_memory_utilization": engine.gpu_memory_utilization,
        "kv_cache_dtype": engine.kv_cache_dtype,
        "disable_custom_all_reduce": engine.disable_custom_all_reduce,
        "trust_remote_code": engine.trust_remote_code,
        "enable_auto_tool_choice": args.enable_auto_tool_choice,
        "tool_call_parser": (ToolParserManager.get_tool_parser(args.tool_call_parser).__name__
                             if args.tool_call_parser else None),
        "reasoning_parser": (ReasoningParserManager.get_reasoning_parser(args.reasoning_parser).__name__
                             if args.reasoning_parser else None),
        "chat_template_content_format": args.chat_template_content_format,
        "performance_mode": engine.performance_mode,
        "max_num_queued_reqs": engine.max_num_queued_reqs,
        "host": args.host,
        "port": args.port,
    }


def use_cpu_platform():
    """The node has no GPU, so vLLM's platform is unspecified and its parser cannot pick device-dependent
    defaults. As vLLM's own `vllm bench` does without a device, use its CPU platform: only those defaults
    differ; the flags, their choices and the serve validation are the same."""
    from vllm import platforms
    if platforms.current_platform.is_unspecified():
        from vllm.platforms.cpu import CpuPlatform
        platforms.current_platform = CpuPlatform()
        return "cpu (no GPU on the node)"
    return type(platforms.current_platform).__name__


def main():
    cases = json.load(sys.stdin)
    platform = use_cpu_platform()
    out, failed = {}, False
    for name, argv in cases.items():
        try:
            got = check(argv)
            out[name] = dict(ok=True, platform=platform, line="%s: parsed; kv-cache %s, custom all-reduce %s, tool parser %s, "
                             "reasoning parser %s, performance mode %s, queue cap %s" % (
                                 name, got["kv_cache_dtype"], "off" if got["disable_custom_all_reduce"] else "on",
                                 got["tool_call_parser"], got["reasoning_parser"], got["performance_mode"],
                                 got["max_num_queued_reqs"]), **got)
        except BaseException as exc:  # argparse exits with SystemExit; report every case
            failed = True
            error = "%s: %s" % (type(exc).__name__, exc)
            out[name] = {"ok": False, "error": error, "line": "%s: refused (%s)" % (name, error),
                         "traceback": traceback.format_exc(limit=3)}
    json.dump(out, sys.stdout, indent=1, sort_keys=True, default=str)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
