"""The words of the report's "Which configuration" section (reports.pages.which), en and zh.

WHICH_EN and WHICH_ZH join STRINGS (same keys; a test checks it). KNOB_NAMES names the engine
knobs of whatif.json for a reader; a knob not named here is shown as its identifier.
"""

WHICH_EN: dict[str, str] = {
    "which_doc_title": "Which configuration: {name}",
    "which_footer": "capplan · which configuration · {name} · generated {date}",
    "which_heading": "Which configuration",
    "which_intro": (
        "Candidate configurations for the same traffic and SLO, ranked by what the fleet for "
        "the planning peak costs per month."
    ),
    "which_whatif_heading": "Predicted by the engine model",
    "which_compare_heading": "Compared runs",
    "which_whatif_source": (
        "Source: {path} (capplan whatif: the limit search against the engine model in virtual "
        "time, before any hardware)."
    ),
    "which_compare_source": (
        "Source: {path} (capplan compare: the limit.json of each run, planned for the same "
        "profile's peak)."
    ),
    "which_context": "Profile {profile} · SLO {slo} · model {model} · peak {peak}",
    "which_not_comparable": (
        "NOT COMPARABLE: these runs were measured on different profiles or SLOs and compared "
        "anyway (--force). Read the ranking with care:"
    ),
    "which_table_heading": "Ranked candidates",
    "which_table_heading_forced": "Ranked candidates (not comparable, --force)",
    "which_col_rank": "Rank",
    "which_col_candidate": "Candidate",
    "which_col_limit": "Limit per instance",
    "which_col_limit_predicted": "Predicted limit (interval)",
    "which_col_binding": "Binds first",
    "which_col_instances": "Instances",
    "which_col_gpus": "GPUs",
    "which_col_cost": "Cost per month",
    "which_col_token_cost": "Cost per M output tokens",
    "which_col_calibration": "Calibration error",
    "which_col_pareto": "Pareto front",
    "which_no_limit": "meets the SLO at no load",
    "which_cannot_fit": "does not fit",
    "which_cannot_fp4": "no FP4 cores",
    "which_cannot_heads": "tp splits no heads",
    "which_cannot_other": "cannot run",
    "which_cannot_fit_lesson": "{labels}: the model does not fit ({gb} GB short per GPU, "
    "before any KV cache); more GPUs per instance or a smaller format would.",
    "which_cannot_fp4_lesson": "{labels}: nvfp4 needs FP4 tensor cores, which this GPU has not.",
    "which_cannot_heads_lesson": "{labels}: the tensor-parallel degree does not split the "
    "model's attention heads evenly, so no engine starts.",
    "which_cannot_other_lesson": "{labels}: this configuration cannot run (its reason is in "
    "the whatif file).",
    "which_pareto_mark": "yes",
    "which_chart": "Cost per month of the fleet for the peak",
    "which_chart_axis": "$ per month",
    "which_chart_pareto": "on the Pareto front (cost against p95 E2E)",
    "which_chart_best": "cheapest",
    "which_chart_more": "The chart shows the {shown} cheapest of {total} candidates.",
    "which_lessons_heading": "What this means for your traffic",
    "which_best": (
        "{label} serves the peak of {peak} within the SLO for the least: {n} instance(s), "
        "{gpus} GPU(s), {cost} per month."
    ),
    "which_predicted": (
        "Predicted, not measured: {label} holds {limit} per instance in the engine model; "
        "published server results put the measured limit between {low} and {high} "
        "({source}). Measure it (capplan limit) before buying."
    ),
    "which_compare_predicted": (
        "Predicted, not measured: the limit of {label}, {limit}, is the engine model's (its "
        "load test ran against capplan's engine emulator); published server results put a "
        "GPU's measured limit between {low} and {high} ({source})."
    ),
    "which_gap_gpu": (
        "For your traffic, a fleet of {cheaper} costs {pct} less than one of {dearer} at the "
        "same SLO ({n1} × {cheaper} for {cost1} against {n2} × {dearer} for {cost2} per month)."
    ),
    "which_gap_run": (
        "{cheaper} costs {pct} less than {dearer} at the same SLO ({n1} instance(s) for {cost1} "
        "against {n2} for {cost2} per month)."
    ),
    "which_gap_run_forced": (
        "{cheaper} costs {pct} less than {dearer} ({n1} instance(s) for {cost1} against {n2} "
        "for {cost2} per month), though the two were not measured alike (above)."
    ),
    "which_gap_tie": (
        "{cheaper} and {dearer} cost the same, {cost1} per month ({n1} against {n2} instance(s))."
    ),
    "which_per_token": (
        "Per million output tokens {label} is the cheapest ({usd} against {best_usd} for "
        "{best}), yet at this peak {best} needs the cheaper fleet: instances come whole, so "
        "at another peak the order can change."
    ),
    "which_no_limit_lesson": "{labels}: the SLO is met at no tested load.",
    "which_engine_ranking": "On {where}, {winner} ranks first, more than 10 % above the next "
    "engine: the engines' order changes with the configuration.",
    "which_no_price": (
        "{labels}: no public price on file for the GPU, so no cost and no rank; the limit "
        "and instance count stand (give whatif --gpu-hour-price to cost it)."
    ),
    "which_near_floor": (
        "Latency, not throughput, sets the limit of {label}: even idle, one instance's "
        "{constraint} is {floor} of the {threshold} allowed ({share}), set by the prompts at "
        "that percentile ({tokens} tokens). More instances carry more traffic, but each "
        "carries little; a faster GPU, more tensor parallelism, shorter prompts or a looser "
        "SLO raise it."
    ),
    "which_knob": "{knob}: {alternative} instead of {baseline} changes the limit by {change}",
    "which_pays": " — it pays off.",
    "which_hurts": " — it hurts.",
    "which_even": " — no real difference (within ±10 %, the noise of two limit searches).",
    "which_no_prediction": "{knob}: {alternative} instead of {baseline}: no prediction.",
    "which_why": "Why: {figure}",
    "which_calibrated": "Calibrated on a measured limit: {note}",
}

WHICH_ZH: dict[str, str] = {
    "which_doc_title": "选哪种配置:{name}",
    "which_footer": "capplan · 选哪种配置 · {name} · 生成于 {date}",
    "which_heading": "选哪种配置",
    "which_intro": "在相同流量与 SLO 下比较候选配置,按承载规划峰值所需集群的每月成本排名。",
    "which_whatif_heading": "引擎模型的预测",
    "which_compare_heading": "对比的运行",
    "which_whatif_source": "来源:{path}(在虚拟时间中对引擎模型进行上限搜索,无需任何硬件)。",
    "which_compare_source": "来源:{path}(各次运行的上限结果,按同一流量画像的峰值规划)。",
    "which_context": "流量画像 {profile} · SLO {slo} · 模型 {model} · 峰值 {peak}",
    "which_not_comparable": (
        "不可比较:这些运行测于不同的流量画像或 SLO,仍被强制比较。请谨慎解读排名:"
    ),
    "which_table_heading": "候选配置排名",
    "which_table_heading_forced": "候选配置排名(不可比较,强制比较)",
    "which_col_rank": "排名",
    "which_col_candidate": "候选配置",
    "which_col_limit": "单实例上限",
    "which_col_limit_predicted": "预测上限(区间)",
    "which_col_binding": "首先触及的约束",
    "which_col_instances": "实例数",
    "which_col_gpus": "GPU 数",
    "which_col_cost": "每月成本",
    "which_col_token_cost": "每百万输出 token 成本",
    "which_col_calibration": "校准误差",
    "which_col_pareto": "帕累托前沿",
    "which_no_limit": "任何负载下都达不到 SLO",
    "which_cannot_fit": "显存放不下",
    "which_cannot_fp4": "无 FP4 核心",
    "which_cannot_heads": "张量并行无法均分注意力头",
    "which_cannot_other": "无法运行",
    "which_cannot_fit_lesson": "{labels}:模型放不下(每块 GPU 还差 {gb} GB,尚未计 KV 缓存);"
    "每个实例用更多 GPU 或更小的格式才行。",
    "which_cannot_fp4_lesson": "{labels}:nvfp4 需要 FP4 张量核心,这块 GPU 没有。",
    "which_cannot_heads_lesson": "{labels}:张量并行度不能均分模型的注意力头,引擎无法启动。",
    "which_cannot_other_lesson": "{labels}:此配置无法运行(原因见 whatif 输出文件)。",
    "which_pareto_mark": "是",
    "which_chart": "承载峰值所需集群的每月成本",
    "which_chart_axis": "每月 $",
    "which_chart_pareto": "位于帕累托前沿(成本对 p95 E2E)",
    "which_chart_best": "最便宜",
    "which_chart_more": "图中显示 {total} 个候选配置中最便宜的 {shown} 个。",
    "which_lessons_heading": "这对您的流量意味着什么",
    "which_best": (
        "{label} 以最低成本在 SLO 内承载 {peak} 的峰值:{n} 个实例,{gpus} 块 GPU,每月 {cost}。"
    ),
    "which_predicted": (
        "预测值,未经实测:引擎模型预测 {label} 每实例承载 {limit};按公开服务结果,实测上限应在 "
        "{low} 至 {high} 之间({source})。采购前请用 capplan 的上限搜索实测。"
    ),
    "which_compare_predicted": (
        "预测值,未经实测:{label} 的上限 {limit} 来自引擎模型(其负载测试的对象是 capplan 的引擎"
        "仿真器);按公开服务结果,GPU 上的实测上限应在 {low} 至 {high} 之间({source})。"
    ),
    "which_gap_gpu": (
        "对您的流量,在相同 SLO 下 {cheaper} 集群比 {dearer} 便宜 {pct}"
        "({n1} × {cheaper} 每月 {cost1},对比 {n2} × {dearer} 每月 {cost2})。"
    ),
    "which_gap_run": (
        "在相同 SLO 下 {cheaper} 比 {dearer} 便宜 {pct}"
        "({n1} 个实例每月 {cost1},对比 {n2} 个实例每月 {cost2})。"
    ),
    "which_gap_run_forced": (
        "{cheaper} 比 {dearer} 便宜 {pct}({n1} 个实例每月 {cost1},对比 {n2} 个实例每月 {cost2}),"
        "但两者并非在相同条件下测得(见上)。"
    ),
    "which_gap_tie": "{cheaper} 与 {dearer} 成本相同,每月 {cost1}({n1} 个实例对比 {n2} 个)。",
    "which_per_token": (
        "按每百万输出 token 计,{label} 最便宜({usd},{best} 为 {best_usd});但在此峰值下 "
        "{best} 的集群更便宜:实例只能整台购买,峰值不同时排名可能改变。"
    ),
    "which_no_limit_lesson": "{labels}:在所测的任何负载下都达不到 SLO。",
    "which_engine_ranking": "在 {where} 上,{winner} 排名第一,比下一个引擎高出 10 % 以上:"
    "引擎的先后随配置而变。",
    "which_no_price": (
        "{labels}:该 GPU 没有公开价格记录,因此没有成本和排名;上限与实例数仍然有效"
        "(给出每 GPU 小时的价格后即可计算成本)。"
    ),
    "which_near_floor": (
        "{label} 的上限由延迟而非吞吐决定:即使空闲,单个实例的 {constraint} 也已达 {floor},"
        "占允许的 {threshold} 的 {share},由该分位的提示词({tokens} 个 token)决定。"
        "增加实例能承载更多流量,但每个实例承载很少;更快的 GPU、更高的张量并行度、"
        "更短的提示词或更宽松的 SLO 才能提高它。"
    ),
    "which_knob": "{knob}:用 {alternative} 替代 {baseline},上限变化 {change}",
    "which_pays": ",值得采用。",
    "which_hurts": ",反而有害。",
    "which_even": ",没有实质差别(在 ±10 % 之内,即两次上限搜索的误差)。",
    "which_no_prediction": "{knob}:用 {alternative} 替代 {baseline}:无预测。",
    "which_why": "原因:{figure}",
    "which_calibrated": "已按实测上限校准,每项预测旁列出校准误差。",
}

KNOB_NAMES: dict[str, dict[str, str]] = {
    "en": {
        "prefix_caching": "Prefix caching",
        "kv_dtype": "KV-cache dtype",
        "kv_cache_dtype": "KV-cache dtype",
        "quantization": "Weight quantization",
        "kv_reservation": "KV-cache allocation",
        "queue_policy": "Queue policy",
        "speculative": "Speculative decoding",
        "on": "on",
        "off": "off",
    },
    "zh": {
        "prefix_caching": "前缀缓存",
        "kv_dtype": "KV 缓存数据类型",
        "kv_cache_dtype": "KV 缓存数据类型",
        "quantization": "权重量化",
        "kv_reservation": "KV 缓存分配方式",
        "queue_policy": "排队策略",
        "speculative": "推测解码",
        "on": "开启",
        "off": "关闭",
    },
}
