"""Long-context items: a report of several thousand characters with one fact (the needle) placed at the start,
the middle or the end; the question asks for that fact. Prompts stay under 6000 characters."""

PARAGRAPHS = [
    "Weekly operations review, platform team. Attendance was full except for the storage rotation, who joined "
    "late because of a maintenance window on the object store. The first topic was the migration of the batch "
    "scheduler to the new cluster, which is now two weeks behind plan because the network policy review took "
    "longer than expected.",
    "Capacity: the inference fleet ran at an average GPU utilisation of 61 percent, with evening peaks close to "
    "90 percent on the interactive pool. The team agreed that the batch pool can absorb some of that load if "
    "the scheduler learns to pre-empt low-priority jobs, which is on the roadmap for next quarter.",
    "Incidents: there were two pages this week. One was a certificate that expired on an internal dashboard, "
    "fixed within the hour; the other was a slow memory leak in the log shipper, which was rolled back to the "
    "previous release. Both have post-incident reviews scheduled and owners assigned.",
    "Cost: spend on accelerators was slightly under budget because two reserved nodes were idle during the "
    "holiday. Finance asked for a forecast for the next two quarters that includes the planned move of the "
    "summarisation workload to quantized deployments.",
    "Quality: the evaluation working group presented the latest paired comparison between the baseline and the "
    "quantized candidate. Overall scores were close, with small regressions in arithmetic word problems and in "
    "generated unit tests; the group recommended running the full suite again after the calibration data is "
    "refreshed with production prompts.",
    "Security: the quarterly access review is complete. Three service accounts with unused permissions were "
    "removed, and the on-call runbook now includes a section on rotating the signing keys of the model registry. "
    "Nobody reported any suspicious activity.",
    "Hiring: two offers were accepted, one for the reliability team and one for the data platform. Onboarding "
    "buddies were assigned. The team still has an open role for a performance engineer with experience in GPU "
    "kernels and serving frameworks.",
    "Customer feedback: enterprise users asked for more predictable latency during business hours and for a way "
    "to pin a conversation to a single model variant, so that answers do not change style halfway through a "
    "session. Product will write a proposal before the next planning cycle.",
    "Documentation: the onboarding guide was rewritten and now explains how requests are routed across precision "
    "tiers, how to read the routing headers in a response, and how to escalate when a workload needs the "
    "highest-fidelity deployment for compliance reasons.",
    "Tooling: the load-testing harness gained a staircase mode that increases concurrency step by step and "
    "records tokens per second, time to first token and error rate at each step, so that capacity claims are "
    "made at the concurrency actually run in production.",
    "Networking: the cross-zone traffic bill went down after the cache layer was moved next to the router "
    "replicas. A follow-up will look at compressing streamed responses, although early measurements suggest the "
    "gain is small for short completions.",
    "Miscellaneous: the office move is confirmed for the end of the month. Desks will be assigned by team, and "
    "the shared lab equipment will be labelled before the movers arrive. Please clear personal items by Friday.",
]

# (id, needle sentence, question, grader, reference, wrong, position)
NEEDLES = [
    ("lc-vault-code-start", "Note for the record: the temporary access code for the staging vault is 7341.",
     "What is the temporary access code for the staging vault? Reply with the code only.",
     {"type": "regex", "pattern": r"\b7341\b"}, "7341", "7314", "start"),
    ("lc-vault-code-middle", "Note for the record: the emergency contact for the data centre in Frankfurt is Jonas Weber.",
     "Who is the emergency contact for the data centre in Frankfurt? Reply with the name only.",
     {"type": "contains", "all_of": ["jonas weber"]}, "Jonas Weber", "Jonas Becker", "middle"),
    ("lc-release-date-end", "Decision: the public release of the routing service is fixed for 14 October.",
     "On which date is the public release of the routing service fixed? Reply with the date only.",
     {"type": "regex", "flags": "i", "pattern": r"\b14(?:th)? (?:of )?october\b|\boctober 14(?:th)?\b|\b14[./]10\b"},
     "14 October", "4 October", "end"),
    ("lc-budget-start", "Decision: the GPU budget for the next quarter was approved at 418,000 dollars.",
     "At what amount was the GPU budget for the next quarter approved? Reply with the number only.",
     {"type": "numeric", "expected": 418000}, "418000", "481000", "start"),
    ("lc-room-middle", "Logistics: the incident retrospective will be held in room Aurora on the fourth floor.",
     "In which room will the incident retrospective be held? Reply with the room name only.",
     {"type": "normalized", "expected": ["Aurora", "room Aurora", "Aurora on the fourth floor"]}, "Aurora", "Borealis", "middle"),
    ("lc-threshold-end", "Decision: the eval gate threshold for the math category was set to 3 points.",
     "What was the eval gate threshold for the math category set to, in points? Reply with the number only.",
     {"type": "numeric", "expected": 3}, "3", "2", "end"),
    ("lc-owner-start", "Action item: Mei Tanaka owns the rollback plan for the quantized summariser.",
     "Who owns the rollback plan for the quantized summariser? Reply with the name only.",
     {"type": "contains", "all_of": ["mei tanaka"]}, "Mei Tanaka", "Mei Takahashi", "start"),
    ("lc-port-middle", "Config change: the metrics exporter now listens on port 9464 instead of 9100.",
     "Which port does the metrics exporter listen on now? Reply with the port number only.",
     {"type": "numeric", "expected": 9464}, "9464", "9100", "middle"),
    ("lc-ticket-end", "Tracking: the calibration data refresh is tracked in ticket OPS-5582.",
     "Which ticket tracks the calibration data refresh? Reply with the ticket id only.",
     {"type": "regex", "pattern": r"\bOPS-5582\b"}, "OPS-5582", "OPS-5528", "end"),
    ("lc-region-start", "Decision: the new inference pool will be built in region eu-north-1.",
     "In which region will the new inference pool be built? Reply with the region id only.",
     {"type": "regex", "pattern": r"\beu-north-1\b"}, "eu-north-1", "eu-west-1", "start"),
    ("lc-ratio-middle", "Measurement: the INT4 deployment served 1.8 times the tokens per second of FP16 at concurrency 32.",
     "How many times the FP16 tokens per second did the INT4 deployment serve at concurrency 32? Reply with the number only.",
     {"type": "numeric", "expected": 1.8, "tolerance": 0.001}, "1.8", "1.4", "middle"),
    ("lc-vendor-end", "Procurement: the replacement network switches will come from the vendor Halvorsen Systems.",
     "Which vendor will supply the replacement network switches? Reply with the vendor name only.",
     {"type": "contains", "all_of": ["halvorsen"]}, "Halvorsen Systems", "Halstead Systems", "end"),
    ("lc-two-facts", "Note: the canary for the AWQ candidate starts at 5 percent; the rollback owner is Ade Okafor.",
     "At what percentage does the canary for the AWQ candidate start, and who is the rollback owner? Reply as 'PERCENT, NAME'.",
     {"type": "regex", "flags": "i", "pattern": r"\b5\s*(?:%|percent)?\s*,\s*ade okafor\b"}, "5, Ade Okafor", "10, Ade Okafor", "middle"),
    ("lc-count-incidents", "Correction: the incident count for the week is three, not two: a DNS misconfiguration was also paged.",
     "According to the correction, how many incidents were there this week? Reply with the number only.",
     {"type": "numeric", "expected": 3}, "3", "2", "end"),
    ("lc-version-start", "Release note: the router was upgraded to version 2.7.1 on Monday.",
     "To which version was the router upgraded? Reply with the version only.",
     {"type": "regex", "pattern": r"\b2\.7\.1\b"}, "2.7.1", "2.1.7", "start"),
    ("lc-deadline-middle", "Deadline: the security questionnaire for the bank customer is due on 3 March.",
     "When is the security questionnaire for the bank customer due? Reply with the date only.",
     {"type": "regex", "flags": "i", "pattern": r"\b3(?:rd)? (?:of )?march\b|\bmarch 3(?:rd)?\b"}, "3 March", "13 March", "middle"),
]

MAX_CHARS = 5800


def document(needle: str, position: str, rotate: int) -> str:
    paras = PARAGRAPHS[rotate:] + PARAGRAPHS[:rotate]
    at = {"start": 0, "middle": len(paras) // 2, "end": len(paras)}[position]
    paras = paras[:at] + [needle] + paras[at:]
    return "\n\n".join(paras)


def items() -> list[dict]:
    out = []
    for i, (item_id, needle, question, grader, ref, wrong, position) in enumerate(NEEDLES):
        prompt = ("Read the meeting notes below and answer the question that follows.\n\n---\n"
                  + document(needle, position, i % len(PARAGRAPHS)) + "\n---\n\nQuestion: " + question)
        assert len(prompt) <= MAX_CHARS, (item_id, len(prompt))
        out.append({"id": item_id, "category": "long_context", "prompt": prompt, "temperature": 0.0,
                    "max_tokens": 64, "grader": grader, "reference": ref, "wrong": wrong,
                    "tags": [f"needle_{position}"]})
    return out
